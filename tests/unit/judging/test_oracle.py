"""The fp64 rule, leaf by leaf, without compiling anything."""

from __future__ import annotations

import collections
import dataclasses
import math

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from pytest_torchcompile.common.kinds import FailureKind
from pytest_torchcompile.common.leaves import (
    LeafResult,
    LeafRule,
    format_table,
    summarized_leaves,
)
from pytest_torchcompile.judging.oracle import compare_outputs, first_disagreement, flatten_outputs
from pytest_torchcompile.judging.rule import leaf_verdict
from pytest_torchcompile.judging.tensor_comparison import compare_tensor


def test_fp16_compiled_closer_to_fp64_than_eager_passes() -> None:
    x = torch.tensor([65500.0], dtype=torch.float16)
    eager = x - torch.tensor(655, dtype=torch.float16) * 100
    compiled = (x.float() - 655.0 * 100).half()  # Inductor computes in fp32 and rounds once
    fp64 = x.double() - 655.0 * 100
    assert not torch.allclose(compiled, eager, atol=1e-4, rtol=1e-4)
    leaf = compare_tensor("out", compiled, eager, fp64, tol=1e-4)
    assert leaf.passed, leaf
    assert leaf.rule == "fp64 rmse"
    assert leaf.rmse_compiled == 0.0
    assert leaf.rmse_eager is not None and leaf.rmse_eager > 1.0


def test_compiled_error_beyond_multiplier_fails_and_reports_worst_element() -> None:
    torch.manual_seed(0)
    fp64 = torch.randn(64, 64, dtype=torch.float64)
    eager = fp64.float()
    compiled = eager.clone()
    compiled[3, 7] += 0.5
    leaf = compare_tensor("out", compiled, eager, fp64, tol=1e-4)
    assert not leaf.passed
    assert leaf.max_error_index == (3, 7)
    assert leaf.max_abs_error is not None and math.isclose(leaf.max_abs_error, 0.5, rel_tol=1e-3)
    assert leaf.ratio is not None and leaf.ratio > 100


@pytest.mark.parametrize(
    ("dtype", "shape", "multiplier"),
    [
        (torch.float32, (64, 64), 2.0),
        (torch.float16, (64, 64), 3.0),
        (torch.bfloat16, (64, 64), 3.0),
        (torch.float32, (999,), 3.0),
        (torch.float32, (4096, 1, 1, 1), 3.0),
    ],
)
def test_multiplier_follows_dtype_and_size(
    dtype: torch.dtype, shape: tuple[int, ...], multiplier: float
) -> None:
    reference = torch.linspace(1, 2, math.prod(shape), dtype=torch.float64).reshape(shape)
    eager = reference.to(dtype)
    passed, rule, figures = leaf_verdict(eager + 1, eager, reference, 1e-4)
    assert (passed, rule, figures[2]) == (False, "fp64 rmse", multiplier)


def test_error_within_multiplier_of_eager_passes() -> None:
    torch.manual_seed(1)
    fp64 = torch.randn(4096, dtype=torch.float64)
    noise = torch.randn(4096, dtype=torch.float64) * 1e-3
    eager = (fp64 + noise).float()
    compiled = (fp64 - 1.5 * noise).float()
    assert compare_tensor("out", compiled, eager, fp64, tol=1e-5).passed
    too_far = (fp64 - 2.5 * noise).float()
    assert not compare_tensor("out", too_far, eager, fp64, tol=1e-5).passed


def test_nonfinite_pattern_mismatch_fails_matching_pattern_passes() -> None:
    eager = torch.tensor([1.0, float("nan"), float("inf"), 2.0])
    same = eager.clone()
    assert compare_tensor("out", same, eager, eager.double(), 1e-4).passed
    moved = torch.tensor([float("nan"), 1.0, float("inf"), 2.0])
    leaf = compare_tensor("out", moved, eager, eager.double(), 1e-4)
    assert not leaf.passed and leaf.rule == "non-finite pattern"
    assert leaf.detail.endswith(
        "2 differ in being NaN or infinite, the first at [0]: compiled nan, eager 1, fp64 1"
    ), leaf.detail
    flipped = torch.tensor([1.0, float("nan"), float("-inf"), 2.0])
    assert not compare_tensor("out", flipped, eager, eager.double(), 1e-4).passed


def test_integer_and_bool_outputs_are_exact_unless_ignored() -> None:
    eager = torch.tensor([1, 2, 3])
    assert compare_tensor("out", eager.clone(), eager, None, 1e-4).passed
    wrong = torch.tensor([1, 2, 4])
    leaf = compare_tensor("out", wrong, eager, None, 1e-4)
    assert not leaf.passed and leaf.rule == "exact" and "1 of 3" in leaf.detail
    assert compare_tensor("out", wrong, eager, None, 1e-4, check_non_float=False).passed
    mask = torch.tensor([True, False])
    assert not compare_tensor("out", ~mask, mask, None, 1e-4).passed


def test_shape_or_dtype_mismatch_fails() -> None:
    eager = torch.zeros(2, 3)
    assert not compare_tensor("out", torch.zeros(3, 2), eager, eager.double(), 1e-4).passed
    assert not compare_tensor(
        "out", torch.zeros(2, 3, dtype=torch.float64), eager, eager.double(), 1e-4
    ).passed


def test_cosine_check_without_fp64_reference() -> None:
    torch.manual_seed(2)
    eager = torch.randn(256)
    close = eager + 1e-3 * torch.randn(256)
    leaf = compare_tensor("out", close, eager, None, 1e-5)
    assert leaf.passed and "cosine" in leaf.rule
    assert not compare_tensor("out", -eager, eager, None, 1e-5).passed


Pair = collections.namedtuple("Pair", ["first", "second"])


@dataclasses.dataclass
class Output:
    logits: torch.Tensor
    extras: dict


def test_nested_paths() -> None:
    value = (
        torch.zeros(1),
        [Pair(torch.ones(1), {"logits": torch.ones(2)})],
        Output(torch.ones(3), {"k": 1}),
    )
    paths = [path for path, _ in flatten_outputs(value)]
    assert paths == [
        "out[0]",
        "out[1][0].first",
        "out[1][0].second['logits']",
        "out[2].logits",
        "out[2].extras['k']",
    ]


def test_compare_outputs_names_failing_leaf_in_table() -> None:
    eager = {"logits": torch.ones(4, 4), "aux": (torch.zeros(2),)}
    compiled = {"logits": torch.ones(4, 4) * 2, "aux": (torch.zeros(2),)}
    reference = {
        "logits": torch.ones(4, 4, dtype=torch.float64),
        "aux": (torch.zeros(2, dtype=torch.float64),),
    }
    comparison = compare_outputs(compiled, eager, reference)
    assert not comparison.passed
    assert [leaf.path for leaf in comparison.failing] == ["out['logits']"]
    table = format_table(comparison.leaves)
    assert "out['logits']" in table and "FAIL" in table and "4x4" in table


def test_structure_difference_is_a_failure() -> None:
    comparison = compare_outputs((torch.ones(1),), (torch.ones(1), torch.ones(1)), None)
    assert not comparison.passed and comparison.structure_error


def test_eager_disagreement_uses_tolerance_for_floats_only_and_names_the_output() -> None:
    a = (torch.ones(3), torch.tensor([1, 2]))
    assert first_disagreement(a, (torch.ones(3) + 1e-7, torch.tensor([1, 2])), 1e-4) is None
    assert first_disagreement(a, (torch.ones(3) + 1e-2, torch.tensor([1, 2])), 1e-4) == "out[0]"
    assert first_disagreement(a, (torch.ones(3), torch.tensor([1, 3])), 1e-4) == "out[1]"


class Cache:
    """Stands for a transformers DynamicCache: an object holding tensors, with no equality."""

    def __init__(self, keys: list[torch.Tensor]) -> None:
        self.layers = [{"keys": k} for k in keys]
        self.layer_class = dict
        self._private = object()


def test_objects_holding_tensors_are_looked_into() -> None:
    eager = {"logits": torch.ones(2), "past": Cache([torch.ones(3), torch.zeros(3)])}
    again = {"logits": torch.ones(2), "past": Cache([torch.ones(3), torch.zeros(3)])}
    assert first_disagreement(eager, again, 1e-4) is None, (
        "two eager runs of a cache-returning model agree"
    )
    paths = [path for path, _ in flatten_outputs(eager)]
    assert "out['past'].layers[1]['keys']" in paths
    broken = {"logits": torch.ones(2), "past": Cache([torch.ones(3), torch.ones(3)])}
    reference = {
        "logits": torch.ones(2, dtype=torch.float64),
        "past": Cache([torch.ones(3, dtype=torch.float64), torch.zeros(3, dtype=torch.float64)]),
    }
    comparison = compare_outputs(broken, eager, reference)
    assert [leaf.path for leaf in comparison.failing] == ["out['past'].layers[1]['keys']"]


def test_checks_run_without_tf32_and_restore_the_callers_setting() -> None:
    from pytest_torchcompile.judging.precision import full_fp32_precision

    saved = torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32
    try:
        torch.backends.cudnn.allow_tf32 = torch.backends.cuda.matmul.allow_tf32 = True
        with full_fp32_precision():
            assert not torch.backends.cudnn.allow_tf32 and not torch.backends.cuda.matmul.allow_tf32
        assert torch.backends.cudnn.allow_tf32 and torch.backends.cuda.matmul.allow_tf32
    finally:
        torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32 = saved


def test_same_error_despite_generated_file_paths_and_numbers() -> None:
    from pytest_torchcompile.judging.judge import GraphVerdict, same_failure

    recorded = (
        "InductorError: RuntimeError: Failed to import /tmp/torchinductor_root/yz/cyzcx53d62.py"
    )
    again = GraphVerdict(
        FailureKind.COMPILE_ERROR,
        error="InductorError: RuntimeError: Failed to import /tmp/torchinductor_root/ab/cab9f1.py",
    )
    other = GraphVerdict(
        FailureKind.COMPILE_ERROR, error="InductorError: CppCompileError: C++ compile error"
    )
    assert same_failure(again, FailureKind.COMPILE_ERROR, recorded, None)
    assert not same_failure(other, FailureKind.COMPILE_ERROR, recorded, None)
    assert same_failure(other, FailureKind.COMPILE_ERROR, recorded, r"CppCompileError")


@given(st.lists(st.tuples(st.booleans(), st.none() | st.floats(0.0, 10.0)), max_size=30))
def test_a_summarized_table_keeps_every_failing_output_and_the_worst_passing_ones(
    outputs: list[tuple[bool, float | None]],
) -> None:
    leaves = [
        LeafResult(
            f"out[{index}]",
            (2,),
            "float32",
            passed,
            "fp64 rmse",
            rmse_compiled=ratio,
            rmse_eager=None if ratio is None else 1.0,
        )
        for index, (passed, ratio) in enumerate(outputs)
    ]
    shown, left_out = summarized_leaves(leaves, passing_rows=5)
    passing = [leaf for leaf in leaves if leaf.passed]
    assert [leaf for leaf in leaves if leaf in shown] == shown  # in their order
    assert [leaf for leaf in leaves if not leaf.passed] == [
        leaf for leaf in shown if not leaf.passed
    ]
    assert len([leaf for leaf in shown if leaf.passed]) == min(len(passing), 5)
    assert left_out == len(passing) - min(len(passing), 5)
    hidden = [leaf.ratio for leaf in passing if leaf not in shown and leaf.ratio is not None]
    for leaf in shown:
        if leaf.passed and hidden:
            assert (leaf.ratio if leaf.ratio is not None else -1.0) >= max(hidden)


def test_a_non_finite_value_where_fp64_has_it_and_eager_does_not_passes() -> None:
    """Eager may be the one that strays from fp64's non-finite values (an fp16 sum underflows to
    0 and takes the other branch of a ``where``): compiled code that gives fp64's infinity there
    is right. Another non-finite value, or one where fp64 is finite, still fails."""
    eager = torch.tensor([0.0, 1.0, 2.0])
    fp64 = torch.tensor([math.inf, 1.0, 2.0], dtype=torch.float64)
    leaf = compare_tensor("out", torch.tensor([math.inf, 1.0, 2.0]), eager, fp64, 1e-4)
    assert (leaf.passed, leaf.rule) == (True, "fp64 rmse"), leaf
    assert leaf.detail == "1 non-finite values differ from eager's as fp64's do"
    assert leaf.max_abs_error == 0.0
    for wrong in (-math.inf, math.nan):
        compiled = torch.tensor([wrong, 1.0, 2.0])
        assert compare_tensor("out", compiled, eager, fp64, 1e-4).rule == "non-finite pattern"
    assert not compare_tensor(
        "out", torch.tensor([math.inf, 1.0, 2.0]), eager, eager.double(), 1e-4
    ).passed
    beside = compare_tensor("out", torch.tensor([math.inf, 1.5, 2.0]), eager, fp64, 1e-4)
    assert (beside.passed, beside.rule) == (False, "fp64 rmse"), beside


def test_a_wholly_non_finite_output_as_fp64_passes() -> None:
    fp64 = torch.tensor([math.inf, math.nan], dtype=torch.float64)
    leaf = compare_tensor("out", fp64.float(), torch.zeros(2), fp64, 1e-4)
    assert (leaf.passed, leaf.rule) == (True, "fp64 rmse"), leaf


def test_a_comparison_eager_rounded_the_other_way_passes_where_compiled_gives_fp64s() -> None:
    """A drawn program: ``sin(x) > y`` in bfloat16, where eager rounds ``sin(x)`` to ``y``'s
    value and says False; compiled code compares in fp32 and says True, as the fp64 run does."""
    eager = torch.tensor([False, True, False])
    fp64 = torch.tensor([True, True, False])
    leaf = compare_tensor("out", torch.tensor([True, True, False]), eager, fp64, 1e-4)
    assert (leaf.passed, leaf.rule) == (True, "exact"), leaf
    assert leaf.detail == "1 of 3 elements differ from eager's as fp64's do"
    # Where eager gives fp64's everywhere, compiled code's flip is wrong.
    wrong = compare_tensor("out", torch.tensor([True, False, False]), fp64, fp64, 1e-4)
    assert (wrong.passed, wrong.detail) == (False, "1 of 3 elements differ"), wrong
    integers = torch.tensor([1, 2, 3])
    assert not compare_tensor("out", torch.tensor([1, 2, 4]), integers, integers, 1e-4).passed
    assert not compare_tensor("out", torch.tensor([1, 2, 4]), integers, None, 1e-4).passed


def test_each_rule_a_repro_names_is_a_leaf_rule() -> None:
    """rule.py stands alone in compact repro files and spells its rules out; each must be a
    LeafRule's value, and the plugin's leaf carries the member."""
    reference = torch.linspace(-1, 1, 64, dtype=torch.float64)
    eager = reference.float()
    integers = torch.tensor([1, 2, 3])
    cases = {
        LeafRule.FP64: ((reference + 0.5).float(), eager, reference),
        LeafRule.ALLCLOSE: (eager, eager, reference),
        LeafRule.EMPTY: (torch.zeros(0), torch.zeros(0), torch.zeros(0, dtype=torch.float64)),
        LeafRule.EXACT: (integers, integers, integers),
        LeafRule.NON_FINITE: (eager.clone().fill_(math.nan), eager, reference),
        LeafRule.COSINE: ((reference + 0.5).float(), eager, None),
    }
    for expected, (compiled, eager_value, fp64) in cases.items():
        _, rule_name, _ = leaf_verdict(compiled, eager_value, fp64, 1e-6)
        assert rule_name == expected and rule_name in {rule.value for rule in LeafRule}
        assert compare_tensor("out", compiled, eager_value, fp64, 1e-6).rule is expected
    _, unchecked, _ = leaf_verdict(integers, integers, integers, 1e-6, check_non_float=False)
    assert unchecked == LeafRule.NOT_CHECKED
