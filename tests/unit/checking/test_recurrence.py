"""A failing check runs its compiled code once more on the same inputs: a deviation that recurs in
this process fails the test whatever its repro shows in a fresh process; only one that does not
recur may be unconfirmed."""

from __future__ import annotations

import pytest
import torch

from pytest_torchcompile.checking.confirmation import Unreproduced, settle
from pytest_torchcompile.checking.model import check_model
from pytest_torchcompile.common.results import CaseResult
from pytest_torchcompile.common.settings import CheckOptions
from pytest_torchcompile.common.verdict import Status

RELU_BUG = {"cpp.inject_relu_bug_TESTING_ONLY": "accuracy"}


class Counting(torch.nn.Module):
    """Relu of a scaled input, counting its calls in a buffer: a compiled copy run twice starts
    the second run from other state unless the check puts the weights back."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("calls", torch.zeros(()))
        self.scale = torch.nn.Parameter(torch.tensor(1.5))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.calls.add_(1)
        return torch.relu(x * self.scale) + self.calls


def test_a_deviation_of_the_compiled_code_recurs() -> None:
    outcome = check_model(
        Counting(),
        (torch.linspace(-2, 2, 32),),
        options=CheckOptions(inductor_config=RELU_BUG, intermediates=False),
    )
    assert outcome.status is Status.FAIL_ACCURACY, outcome.message
    assert outcome.recurs


def test_a_training_check_runs_again_from_the_caller_weights() -> None:
    """Optimizer steps change the compiled copy's weights: run again from those, the steps would
    land elsewhere; from the caller's, the deviation recurs exactly."""
    outcome = check_model(
        Counting(),
        (torch.linspace(-2, 2, 32),),
        options=CheckOptions(inductor_config=RELU_BUG, intermediates=False, steps=2, lr=0.1),
    )
    assert outcome.status is Status.FAIL_ACCURACY, outcome.message
    assert outcome.recurs


_state = {"traced": False, "wrong_once": False}


@torch.library.custom_op("recurrence_test::once_wrong", mutates_args=())
def once_wrong(x: torch.Tensor) -> torch.Tensor:
    """Right, but for its first call after the first compile traced it: then 1% off."""
    if _state["wrong_once"]:
        _state["wrong_once"] = False
        return x * 1.01
    return x.clone()


@once_wrong.register_fake
def _(x: torch.Tensor) -> torch.Tensor:
    # Traced first by the check's compile, after its eager and fp64 runs: its compiled run is
    # the next call. Later traces (the check's own compiles aside) arm nothing.
    if not _state["traced"]:
        _state["traced"] = _state["wrong_once"] = True
    return torch.empty_like(x)


def test_a_deviation_that_does_not_recur_is_told_apart() -> None:
    outcome = check_model(
        lambda x: once_wrong(x) * 2,
        (torch.linspace(-2, 2, 32),),
        options=CheckOptions(intermediates=False),
    )
    assert outcome.status is Status.FAIL_ACCURACY, outcome.message
    assert not outcome.recurs


def _finding() -> CaseResult:
    return CaseResult("test_x.py::test_y", Status.FAIL_ACCURACY, "1 of 1 outputs deviate")


@pytest.mark.parametrize(
    ("recurs", "fails_here", "status", "defect"),
    [
        (False, False, Status.UNCONFIRMED, False),
        (True, False, Status.FAIL_ACCURACY, True),
        (False, True, Status.FAIL_ACCURACY, False),
        (True, True, Status.FAIL_ACCURACY, False),
    ],
)
def test_only_a_deviation_that_does_not_recur_is_unconfirmed(
    recurs: bool, fails_here: bool, status: Status, defect: bool
) -> None:
    result = _finding()
    settle(result, Unreproduced("its repro, judged in a fresh process, passes", fails_here), recurs)
    assert result.status is status
    assert (result.unconfirmed is not None) is (status is Status.UNCONFIRMED)
    if status is Status.FAIL_ACCURACY:
        assert result.message.startswith("1 of 1 outputs deviate; the deviation recurs")
        assert "judged in a fresh process, passes" in result.message
        assert ("a defect of the repro" in result.message) is defect
