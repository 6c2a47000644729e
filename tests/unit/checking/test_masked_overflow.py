"""A masked deviation is a finding only where it is not eager's own overflow spreading through an
op by another algorithm."""

from __future__ import annotations

import math

import torch

from pytest_torchcompile.checking.masked import deviates_on_its_own
from pytest_torchcompile.common.kinds import FailureKind
from pytest_torchcompile.common.leaves import LeafResult
from pytest_torchcompile.judging.judge import GraphVerdict


def failing(rule: str) -> GraphVerdict:
    return GraphVerdict(FailureKind.ACCURACY, [LeafResult("out[0]", (4,), "float16", False, rule)])


OVERFLOWED = [torch.tensor([1.0, math.inf, 2.0], dtype=torch.float16)]
FINITE = [torch.tensor([1.0, 3.0, 2.0], dtype=torch.float16)]


def test_non_finite_values_spread_from_eagers_overflow_are_no_finding() -> None:
    assert not deviates_on_its_own(
        failing("non-finite pattern"), OVERFLOWED, graph_inputs_finite=True
    )


def test_wrong_finite_values_beside_eagers_overflow_are_a_finding() -> None:
    assert deviates_on_its_own(failing("fp64 rmse"), OVERFLOWED, graph_inputs_finite=True)


def test_a_non_finite_value_from_finite_inputs_is_a_finding() -> None:
    assert deviates_on_its_own(failing("non-finite pattern"), FINITE, graph_inputs_finite=True)


def test_non_finite_values_the_test_itself_passed_in_are_judged_as_ever() -> None:
    """A graph handed infinities by its caller (NaN propagation bugs of max and pooling are real)."""
    assert deviates_on_its_own(failing("non-finite pattern"), OVERFLOWED, graph_inputs_finite=False)


def test_a_passing_cut_is_no_finding() -> None:
    assert not deviates_on_its_own(GraphVerdict(None), FINITE, graph_inputs_finite=True)
