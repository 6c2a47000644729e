"""Property tests for the input strategies (pytest_torchcompile.hunting.tensors), through the
public face users import them from (pytest_torchcompile.strategies)."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import HealthCheck, Phase, find, given, settings
from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument, NoSuchExample

from pytest_torchcompile.strategies import (
    FLOAT_DTYPES,
    INTEGER_DTYPES,
    batched,
    model_args,
    shapes,
    tensors,
)

# No example database: these tests must not write .hypothesis/ into the checkout.
quick = settings(
    max_examples=25,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)
# find() without the explain phase, which would replay every shrunk example many more times.
search = settings(
    max_examples=300, deadline=None, database=None, phases=[Phase.generate, Phase.shrink]
)

ALL_DTYPES = (*FLOAT_DTYPES, *INTEGER_DTYPES, torch.bool)
LOW_PRECISION = (torch.float16, torch.bfloat16)


@quick
@given(st.data(), st.integers(0, 3), st.integers(0, 3), st.integers(0, 5), st.integers(0, 5))
def test_shapes_stay_in_bounds(data, min_dims, extra_dims, min_side, extra_side):
    shape = data.draw(shapes(min_dims, min_dims + extra_dims, min_side, min_side + extra_side))
    assert isinstance(shape, tuple)
    assert min_dims <= len(shape) <= min_dims + extra_dims
    assert all(min_side <= side <= min_side + extra_side for side in shape)


@quick
@given(st.data(), shapes(0, 4, 0, 6), st.sampled_from(ALL_DTYPES))
def test_fixed_shape_and_dtype_are_honoured(data, shape, dtype):
    tensor = data.draw(tensors(shape=shape, dtype=dtype))
    assert tuple(tensor.shape) == shape
    assert tensor.dtype == dtype
    assert tensor.device.type == "cpu"
    assert not tensor.requires_grad


@quick
@given(tensors(min_dims=2, max_dims=3, min_side=2, max_side=5))
def test_defaults_draw_float32_within_dims_and_sides(tensor):
    assert tensor.dtype == torch.float32
    assert 2 <= tensor.dim() <= 3
    assert all(2 <= side <= 5 for side in tensor.shape)


@quick
@given(tensors(dtype=LOW_PRECISION), tensors(dtype=st.sampled_from([torch.int8, torch.bool])))
def test_dtype_sequences_and_strategies_are_drawn_from(low_precision, small):
    assert low_precision.dtype in LOW_PRECISION
    assert small.dtype in (torch.int8, torch.bool)


@quick
@given(tensors(shape=shapes(1, 4, 1, 6), layout="contiguous"))
def test_contiguous_layout(tensor):
    assert tensor.is_contiguous()


@quick
@given(tensors(layout="non_contiguous", dtype=ALL_DTYPES))
def test_non_contiguous_layout_is_not_contiguous(tensor):
    if tensor.numel() > 1:
        assert not tensor.is_contiguous()


@quick
@given(tensors(shape=(1, 1, 5, 1), layout="non_contiguous"))
def test_non_contiguous_view_of_a_single_wide_dim(tensor):
    assert tensor.shape == (1, 1, 5, 1)
    assert not tensor.is_contiguous()


@quick
@given(tensors(layout="channels_last"), tensors(shape=(2, 3, 4, 5), layout="channels_last"))
def test_channels_last_layout(drawn_shape, fixed_shape):
    for tensor in (drawn_shape, fixed_shape):
        assert tensor.dim() == 4
        assert tensor.is_contiguous(memory_format=torch.channels_last)
    # A 3-channel 4x5 image is contiguous in exactly one of the two formats.
    assert not fixed_shape.is_contiguous()


def test_any_layout_produces_every_layout():
    assert not find(tensors(), lambda t: not t.is_contiguous(), settings=search).is_contiguous()
    channels_last = find(
        tensors(),
        lambda t: t.is_contiguous(memory_format=torch.channels_last) and not t.is_contiguous(),
        settings=search,
    )
    assert channels_last.dim() == 4


@quick
@given(tensors(dtype=LOW_PRECISION, min_dims=2, max_dims=4, min_side=4, max_side=16))
def test_low_precision_values_are_finite_and_in_default_range(tensor):
    assert torch.isfinite(tensor).all()
    assert tensor.abs().max() <= 4
    assert torch.isfinite(tensor.sum())
    assert torch.isfinite(tensor.float().pow(2).sum())


@quick
@given(tensors(shape=(300,), dtype=torch.float16, elements=(4.0, 4.0)))
def test_worst_case_fp16_sum_of_a_few_hundred_elements_is_finite(tensor):
    assert torch.isfinite(tensor.sum())


def test_low_precision_never_exceeds_default_range():
    # A stronger search than @given's: no drawn fp16/bf16 tensor leaves [-4, 4].
    with pytest.raises(NoSuchExample):
        find(tensors(dtype=LOW_PRECISION), lambda t: bool(t.abs().max() > 4), settings=search)


@quick
@given(st.data(), st.sampled_from(FLOAT_DTYPES), st.floats(-100, 100), st.floats(0, 50))
def test_float_elements_bounds(data, dtype, low, width):
    high = low + width
    tensor = data.draw(tensors(dtype=dtype, elements=(low, high)))
    # Bounds are rounded to the dtype, so allow one ulp of it.
    slack = 2 * abs(torch.finfo(dtype).eps) * max(abs(low), abs(high), 1.0)
    assert tensor.double().min() >= low - slack
    assert tensor.double().max() <= high + slack


@quick
@given(tensors(dtype=INTEGER_DTYPES, elements=(0, 3)), tensors(dtype=INTEGER_DTYPES))
def test_integer_values_in_range(indices, default):
    assert indices.min() >= 0 and indices.max() <= 3
    low = 0 if default.dtype == torch.uint8 else -8
    assert low <= default.min() and default.max() <= 8


@quick
@given(tensors(dtype=torch.bool, min_side=4))
def test_bool_tensors(tensor):
    assert tensor.dtype == torch.bool
    assert set(tensor.flatten().tolist()) <= {False, True}


@quick
@given(tensors(dtype=FLOAT_DTYPES, layout="non_contiguous", requires_grad=True))
def test_requires_grad_gives_leaves(tensor):
    assert tensor.requires_grad and tensor.is_leaf
    tensor.float().sum().backward()
    assert tensor.grad is not None


def test_generation_leaves_the_global_rng_alone():
    torch.manual_seed(0)
    expected = torch.rand(3)
    torch.manual_seed(0)
    find(tensors(shape=(64,)), lambda t: bool(t.max() > 3), settings=search)
    assert torch.equal(torch.rand(3), expected)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"shape": (2, 3, 4), "layout": "channels_last"},
        {"layout": "channels_last", "max_dims": 3},
        {"layout": "strided"},
        {"dtype": torch.complex64},
        {"dtype": torch.int32, "requires_grad": True},
        {"dtype": torch.float16, "elements": (0, 1e5)},
        {"dtype": torch.float32, "elements": (1.0, -1.0)},
        {"dtype": torch.float32, "elements": (0.0, math.inf)},
        {"dtype": torch.uint8, "elements": (-3, -1)},
        {"dtype": torch.int64, "elements": (0.2, 0.8)},
        {"shape": (2, -1)},
    ],
)
def test_invalid_arguments_are_rejected_early(kwargs):
    with pytest.raises(InvalidArgument):
        tensors(**kwargs)


def test_invalid_drawn_shape_is_rejected_at_draw_time():
    strategy = tensors(shape=st.just((2, 3)), layout="channels_last")
    with pytest.raises(InvalidArgument):
        find(strategy, lambda t: True, settings=search)


@quick
@given(model_args(tensors(shape=(2, 8)), tensors(shape=(8,), dtype=torch.int64), 0.5, "mean"))
def test_model_args_builds_a_tuple(args):
    assert isinstance(args, tuple) and len(args) == 4
    x, index, scale, reduction = args
    assert x.shape == (2, 8) and index.shape == (8,) and index.dtype == torch.int64
    assert (scale, reduction) == (0.5, "mean")


@quick
@given(
    batched(
        lambda b: (tensors(shape=(b, 8)), tensors(shape=(b,), dtype=torch.int64, elements=(0, 3))),
        batch=st.integers(1, 8),
    )
)
def test_batched_shares_the_batch_dim(args):
    logits, target = args
    assert logits.shape[0] == target.shape[0]
    assert 1 <= target.shape[0] <= 8
    assert target.min() >= 0 and target.max() <= 3


@quick
@given(
    batched(
        lambda sizes: {"x": tensors(shape=sizes), "w": tensors(shape=sizes[::-1]), "k": 2},
        batch=st.tuples(st.integers(1, 4), st.integers(1, 4)),
    )
)
def test_batched_mapping_and_tuple_sizes(kwargs):
    assert kwargs["x"].shape == kwargs["w"].shape[::-1]
    assert kwargs["k"] == 2


@quick
@given(
    tensors(shape=st.shared(st.integers(1, 8), key="batch").map(lambda b: (b, 4))),
    tensors(shape=st.shared(st.integers(1, 8), key="batch").map(lambda b: (b,))),
)
def test_shared_pattern_from_the_docs(x, y):
    assert x.shape[0] == y.shape[0]


def test_batched_rejects_a_bad_build():
    with pytest.raises(InvalidArgument):
        find(batched(lambda b: b), lambda args: True, settings=search)


def test_shrinking_finds_the_smallest_shape():
    tensor = find(tensors(), lambda t: t.numel() >= 6, settings=search)
    # Usually (6,); the shrinker cannot always merge the dims of (2, 3) into one.
    assert tensor.numel() == 6 and tensor.dim() <= 2
    assert tensor.dtype == torch.float32 and tensor.is_contiguous()
    assert not tensor.any()


def test_shrinking_reduces_a_shared_batch():
    args = find(
        batched(lambda b: (tensors(shape=(b, 8)), tensors(shape=(b,)))),
        lambda args: args[0].shape[0] >= 3,
        settings=search,
    )
    assert args[0].shape == (3, 8) and args[1].shape == (3,)


def test_shrinking_simplifies_small_tensor_values():
    tensor = find(tensors(shape=(3,)), lambda t: bool(t.sum() > 1), settings=search)
    assert int((tensor != 0).sum()) == 1


def test_shrinking_big_tensors_reduces_the_shape():
    tensor = find(
        tensors(dtype=torch.float16),
        lambda t: t.numel() >= 100 and bool((t >= 3).any()),
        settings=search,
    )
    # A shape where lowering any side by one leaves fewer than 100 elements has under 200.
    assert 100 <= tensor.numel() < 200
    assert tensor.dtype == torch.float16
