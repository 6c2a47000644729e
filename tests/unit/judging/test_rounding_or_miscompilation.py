"""What the fp64 rule calls rounding and what it calls a miscompilation: a second legitimate
evaluation's error as the floor (the batch reversed), outputs no result in their dtype can be
judged by (inconclusive), and the wrong values that stay failures."""

from __future__ import annotations

import pytest
import torch

from pytest_torchcompile.common.leaves import LeafRule
from pytest_torchcompile.common.verdict import Comparison
from pytest_torchcompile.judging.reordering import channels_last, noise_floors, reversed_batch
from pytest_torchcompile.judging.tensor_comparison import compare_tensor

TOL = 1e-4


def noisy(
    reference: torch.Tensor, relative: float, seed: int, dtype: torch.dtype = torch.float32
) -> torch.Tensor:
    """``reference`` plus Gaussian noise of rms ``relative`` times its rms, in ``dtype``."""
    noise = torch.randn(
        reference.shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64
    )
    return (reference + relative * float(reference.square().mean().sqrt()) * noise).to(dtype)


@pytest.fixture
def reference() -> torch.Tensor:
    return torch.randn(4000, generator=torch.Generator().manual_seed(0), dtype=torch.float64) * 50


def test_a_wrong_value_of_a_well_conditioned_output_still_fails(reference: torch.Tensor) -> None:
    eager, compiled = noisy(reference, 1e-3, 1), noisy(reference, 1e-2, 2)

    leaf = compare_tensor("out", compiled, eager, reference, TOL)

    assert (leaf.passed, leaf.rule, leaf.detail) == (False, "fp64 rmse", "")


def test_an_output_eager_itself_got_20_percent_off_still_fails_a_compiled_one_further_off(
    reference: torch.Tensor,
) -> None:
    """Eager far from fp64 is no excuse: a random graph's fp64 replay can sit that far from
    eager's draws, and a wrong kernel there must still fail."""
    eager, compiled = noisy(reference, 0.2, 1), noisy(reference, 0.8, 2)

    assert compare_tensor("out", compiled, eager, reference, TOL).passed is False


def overflowed(
    dtype: torch.dtype = torch.float16,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """fp64, eager and compiled results of an output an intermediate overflowed in ``dtype``:
    fp64 finite everywhere, eager's infinities and NaNs spread over its first 40 values, compiled
    code's over 25 of them (rounding placed the overflow otherwise), the rest alike."""
    reference = (
        torch.randn(200, generator=torch.Generator().manual_seed(3), dtype=torch.float64) * 100
    )
    eager = reference.to(dtype)
    eager[:40:2], eager[1:40:2] = torch.inf, torch.nan
    compiled = reference.to(dtype)
    compiled[:25:2] = torch.nan
    compiled[1:25:2] = (torch.inf * reference[1:25:2].sign()).to(dtype)  # where eager has a NaN
    return reference, eager, compiled


def test_non_finite_values_only_where_eager_itself_overflowed_are_inconclusive() -> None:
    reference, eager, compiled = overflowed()

    leaf = compare_tensor("out", compiled, eager, reference, TOL)

    assert (leaf.passed, leaf.rule) == (True, LeafRule.INCONCLUSIVE)
    assert leaf.detail.startswith(
        "eager itself overflows in float16 (40 values non-finite where fp64 is finite)"
    )
    assert Comparison([leaf]).inconclusive == [leaf] and Comparison([leaf]).passed


def test_a_non_finite_value_where_eager_is_finite_and_in_range_fails_beside_eagers_overflow() -> (
    None
):
    reference, eager, compiled = overflowed()
    compiled[100] = torch.nan

    assert (compare_tensor("out", compiled, eager, reference, TOL).rule) == "non-finite pattern"


def test_an_infinity_of_the_other_sign_than_eagers_fails_beside_eagers_overflow() -> None:
    reference, eager, compiled = overflowed()
    compiled[30] = -torch.inf  # eager +inf there

    assert (compare_tensor("out", compiled, eager, reference, TOL).rule) == "non-finite pattern"


def test_a_wrong_finite_value_fails_beside_eagers_overflow() -> None:
    reference, eager, compiled = overflowed()
    compiled[60:] = compiled[60:] * 1.05

    leaf = compare_tensor("out", compiled, eager, reference, TOL)

    assert (leaf.passed, leaf.rule) == (False, "non-finite pattern")


def test_an_overflow_at_the_edge_of_float16_is_inconclusive() -> None:
    reference = torch.tensor([1.0, 60000.0, 65400.0, 2.0], dtype=torch.float64)
    eager = reference.to(torch.float16)
    compiled = eager.clone()
    compiled[2] = torch.inf  # rounded up past 65504 where eager stayed finite

    leaf = compare_tensor("out", compiled, eager, reference, TOL)

    assert (leaf.passed, leaf.rule) == (True, LeafRule.INCONCLUSIVE)
    assert leaf.detail.startswith(
        "overflow at the edge of float16's range; compiled has 1 non-finite"
    )


@pytest.mark.parametrize("wrong", [torch.inf, torch.nan, -torch.inf])
def test_a_non_finite_value_away_from_the_edge_fails(wrong: float) -> None:
    reference = torch.tensor([1.0, 60000.0, 3.0, 2.0], dtype=torch.float64)
    eager = reference.to(torch.float16)
    compiled = eager.clone()
    compiled[2] = wrong

    leaf = compare_tensor("out", compiled, eager, reference, TOL)

    assert (leaf.passed, leaf.rule) == (False, "non-finite pattern")


@pytest.mark.parametrize("fp64", [70000.0, -70000.0, 3.0])
def test_an_infinity_of_the_other_sign_is_no_overflow(fp64: float) -> None:
    reference = torch.tensor([1.0, fp64], dtype=torch.float64)
    eager = torch.tensor([1.0, torch.inf], dtype=torch.float16)
    compiled = torch.tensor([1.0, -torch.inf], dtype=torch.float16)

    assert compare_tensor("out", compiled, eager, reference, TOL).rule == "non-finite pattern"


def test_an_infinity_against_a_finite_value_of_the_other_sign_is_no_overflow() -> None:
    reference = torch.tensor([1.0, 65000.0], dtype=torch.float64)
    eager = torch.tensor([1.0, 65000.0], dtype=torch.float16)
    compiled = torch.tensor([1.0, -torch.inf], dtype=torch.float16)

    assert compare_tensor("out", compiled, eager, reference, TOL).rule == "non-finite pattern"


def test_a_lucky_eager_is_measured_against_the_reversed_batch_run(reference: torch.Tensor) -> None:
    # eager 100x luckier than compiled and than the same computation on the batch reversed
    eager, compiled = (
        noisy(reference, 1e-5, 1, torch.float64),
        noisy(reference, 1e-3, 2, torch.float64),
    )
    reordered_error = 1.2e-3 * float(reference.square().mean().sqrt())

    leaf = compare_tensor("out", compiled, eager, reference, TOL, noise=reordered_error)
    alone = compare_tensor("out", compiled, eager, reference, TOL)

    assert not alone.passed
    assert leaf.passed and leaf.rule == "fp64 rmse"
    assert leaf.detail.startswith("measured against another valid eager evaluation's rmse")


def test_a_reordered_run_as_noisy_as_eager_changes_nothing(reference: torch.Tensor) -> None:
    eager, compiled = (
        noisy(reference, 1e-5, 1, torch.float64),
        noisy(reference, 1e-3, 2, torch.float64),
    )
    same_noise = 1e-5 * float(reference.square().mean().sqrt())

    assert not compare_tensor("out", compiled, eager, reference, TOL, noise=same_noise).passed


def per_sample_and_batch_sum(x: torch.Tensor) -> dict[str, torch.Tensor]:
    return {"out": x * 2, "sum": x.sum(0), "running": x.cumsum(0)}


def test_the_floor_counts_only_outputs_the_reversal_is_a_symmetry_of() -> None:
    x = torch.randn(6, 5, generator=torch.Generator().manual_seed(0))
    reordered = reversed_batch(((x,), {}))
    assert reordered is not None
    (reversed_args, _), batch = reordered
    assert batch == 6 and torch.equal(reversed_args[0], x.flip(0))

    reference = {"out": per_sample_and_batch_sum(x.double())}
    floors = noise_floors(
        {"out": per_sample_and_batch_sum(reversed_args[0])},
        {"out": per_sample_and_batch_sum(reversed_args[0].double())},
        reference,
        batch,
    )

    assert set(floors) == {"out['out']", "out['sum']"}  # a cumulative sum depends on the order
    assert floors["out['out']"] < 1e-6 and floors["out['sum']"] < 1e-5


def test_no_batch_no_floor() -> None:
    assert reversed_batch(((torch.randn(1, 3),), {})) is None
    assert reversed_batch(((2.0,), {"x": torch.tensor(3.0)})) is None


def test_channels_last_inputs_are_a_floor_where_values_keep_their_places() -> None:
    torch.manual_seed(0)
    conv = torch.nn.Conv2d(3, 8, 3).double()
    x = torch.randn(2, 3, 9, 9, dtype=torch.float64)
    laid_out = channels_last(((x,), {"scale": 2.0}))
    assert laid_out is not None
    (again,), kwargs = laid_out
    assert (
        again.is_contiguous(memory_format=torch.channels_last)
        and torch.equal(again, x)
        and kwargs == {"scale": 2.0}
    )

    def outputs(value: torch.Tensor, dtype: torch.dtype) -> dict[str, torch.Tensor]:
        return {"out": conv.to(dtype)(value.to(dtype))}

    floors = noise_floors(
        {"out": outputs(again, torch.float32)},
        {"out": outputs(again, torch.float64)},
        {"out": outputs(x, torch.float64)},
        None,
    )

    assert set(floors) == {"out['out']"} and 0 < floors["out['out']"] < 1e-5


def test_no_4d_input_or_all_channels_last_already_no_layout_floor() -> None:
    assert channels_last(((torch.randn(4, 3),), {})) is None
    assert (
        channels_last(
            ((torch.randn(2, 3, 4, 4).contiguous(memory_format=torch.channels_last),), {})
        )
        is None
    )


def quantized(values: torch.Tensor) -> torch.Tensor:
    """Through float8 and back, as a quantized model's activations go."""
    return values.to(torch.float8_e4m3fn).to(torch.float32)


def test_an_output_whose_precision_the_graph_fixes_is_judged_against_eager_not_a_zero_error() -> (
    None
):
    """The fp64 run of a graph whose ops fix float32 (torchao's fp8 convolutions:
    ``output_dtype=torch.float32``) returns eager's values: eager's error is zero, no sample of
    rounding, and one quantization step moved by another accumulation order is no miscompilation."""
    activations = torch.rand(4000, generator=torch.Generator().manual_seed(0)) * 4
    eager = quantized(activations)
    compiled = quantized(activations * (1 + 2e-2 * (torch.arange(4000) % 97 == 0)))
    assert not torch.equal(compiled, eager)

    leaf = compare_tensor("out", compiled, eager, eager.clone(), TOL)

    assert (leaf.passed, leaf.rule) == (True, "cosine vs eager (the fp64 run kept its dtype)")
    wrong = compare_tensor("out", compiled + 1, eager, eager.clone(), TOL)
    assert (wrong.passed, wrong.rule) == (False, "cosine vs eager (the fp64 run kept its dtype)")


def test_an_exact_output_of_an_fp64_run_still_fails_a_small_wrong_value() -> None:
    """Eager's zero error against an fp64 reference is a real sample (a copy, a gather): the fp64
    rule stands there."""
    reference = torch.arange(4000, dtype=torch.float64)
    wrong = reference.to(torch.float32).clone()
    wrong[7] += 1

    leaf = compare_tensor("out", wrong, reference.to(torch.float32), reference, TOL)

    assert (leaf.passed, leaf.rule) == (False, "fp64 rmse")


def _in_epsilons(compiled: torch.Tensor, reference: torch.Tensor) -> float:
    error = float((compiled.double() - reference).square().mean().sqrt())
    return error / (torch.finfo(compiled.dtype).eps * float(reference.square().mean().sqrt()))


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_a_half_precision_result_within_its_formats_resolution_passes_and_says_so(
    reference: torch.Tensor, dtype: torch.dtype
) -> None:
    """torchvision's wide_resnet50_2 in bf16 (H200): eager 0.3 epsilons of bf16 off fp64,
    compiled code 1.3 (its fused kernels keep fp32 where eager rounds each op): ratio 3.9, and
    rounding all the same."""
    eps = torch.finfo(dtype).eps
    eager, compiled = noisy(reference, 0.3 * eps, 1, dtype), noisy(reference, 1.3 * eps, 2, dtype)
    assert 1.0 < _in_epsilons(compiled, reference) < 2.0

    leaf = compare_tensor("out", compiled, eager, reference, TOL)

    assert leaf.passed and leaf.rule == "fp64 rmse" and leaf.rmse_compiled > 3 * leaf.rmse_eager
    assert leaf.detail.startswith(
        f"within {str(dtype).replace('torch.', '')}'s resolution: compiled's rmse is 1."
    )


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_a_half_precision_result_beyond_its_formats_resolution_still_fails(
    reference: torch.Tensor, dtype: torch.dtype
) -> None:
    eps = torch.finfo(dtype).eps
    eager, compiled = noisy(reference, 0.3 * eps, 1, dtype), noisy(reference, 3 * eps, 2, dtype)

    leaf = compare_tensor("out", compiled, eager, reference, TOL)

    assert (leaf.passed, leaf.detail) == (False, "")


def test_the_resolution_is_no_slack_for_float32(reference: torch.Tensor) -> None:
    """fp32's epsilon is 1.2e-7: its resolution would excuse nothing a training check catches,
    and an fp32 result is judged by the rule alone."""
    eps, large = torch.finfo(torch.float32).eps, reference * 1000  # tol / 10 then excuses nothing
    eager, compiled = noisy(large, 0.1 * eps, 1), noisy(large, 1.5 * eps, 2)

    leaf = compare_tensor("out", compiled, eager, large, TOL)

    assert (leaf.passed, leaf.detail) == (False, "")


def _masks(flips: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """fp64's mask of ``reference > 0`` and one whose ``flips`` elements nearest the tie (those
    rounding moves across it) are flipped, the others placed by ``seed``."""
    values = torch.randn(4096, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    mask = values > 0
    near = values.abs().argsort()[: 4 * flips]
    chosen = near[torch.randperm(len(near), generator=torch.Generator().manual_seed(seed))][:flips]
    flipped = mask.clone()
    flipped[chosen] = ~flipped[chosen]
    return mask, flipped


def test_a_mask_computed_from_floats_may_flip_where_eagers_own_rounding_flips_others() -> None:
    """A saved ReLU mask of a bf16 training graph: eager's mask differs from fp64's in 40 elements
    near the tie, compiled code's in 60 others. Neither is wrong."""
    reference, eager = _masks(40, seed=2)
    _, compiled = _masks(60, seed=3)

    leaf = compare_tensor("mask", compiled, eager, reference, TOL)

    assert (leaf.passed, leaf.rule) == (True, "exact")
    assert "compiled's differ in 60 and eager's in 40" in leaf.detail


def test_a_mask_flipped_far_more_often_than_eagers_rounding_flips_it_fails() -> None:
    reference, eager = _masks(10, seed=2)
    _, compiled = _masks(400, seed=3)

    leaf = compare_tensor("mask", compiled, eager, reference, TOL)

    assert (leaf.passed, leaf.rule) == (False, "exact")
    assert Comparison([leaf]).fails_only_in_non_float


def test_an_integer_result_eager_computes_exactly_allows_no_flip() -> None:
    """Where eager's value is fp64's everywhere (integer arithmetic, an index), one wrong element
    fails."""
    reference = torch.arange(4096)
    compiled = reference.clone()
    compiled[5] += 1

    leaf = compare_tensor("index", compiled, reference.clone(), reference, TOL)

    assert (leaf.passed, leaf.rule) == (False, "exact")
