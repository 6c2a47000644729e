"""How a check uses the fp64 rule's two ways of telling rounding from a miscompilation: the
reversed-batch floor, computed only for a check that fails, and inconclusive outputs, which make
the check's status ``inconclusive`` instead of a failure."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from pytest_torchcompile.checking import floors as checking_floors
from pytest_torchcompile.checking.model import check_model
from pytest_torchcompile.common.settings import CheckOptions
from pytest_torchcompile.common.verdict import Status
from pytest_torchcompile.judging import tensor_comparison

RELU_BUG = CheckOptions(
    inductor_config={"cpp.inject_relu_bug_TESTING_ONLY": "accuracy"}, intermediates=False
)


def relu_of_linear() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, 4), torch.nn.ReLU()).eval()


def test_a_failure_the_reversed_batch_run_explains_passes(monkeypatch: pytest.MonkeyPatch) -> None:
    asked: list[int] = []

    def floors(*args: Any) -> dict[str, float]:
        asked.append(args[-1])
        return {"out": 1e6}

    monkeypatch.setattr(checking_floors, "noise_floors", floors)

    outcome = check_model(relu_of_linear(), (torch.randn(4, 8),), options=RELU_BUG)

    assert outcome.status is Status.PASS, outcome.message
    assert asked == [4]
    assert outcome.comparison.leaves[0].detail.startswith(
        "measured against another valid eager evaluation's rmse"
    )


def test_a_passing_check_runs_no_reversed_batch(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(
        checking_floors, "reversed_batch", lambda *args: pytest.fail("a passing check reordered")
    )

    assert check_model(relu_of_linear(), (torch.randn(4, 8),)).status is Status.PASS


def test_a_check_whose_only_failures_are_inconclusive_is_inconclusive(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(
        tensor_comparison, "leaf_verdict", lambda *args: (False, "non-finite pattern", ())
    )
    monkeypatch.setattr(
        tensor_comparison, "inconclusive_reason", lambda *args: "eager itself overflows: test"
    )

    outcome = check_model(relu_of_linear(), (torch.randn(4, 8),), options=RELU_BUG)

    assert outcome.status is Status.INCONCLUSIVE and outcome.passed
    assert outcome.message.startswith(
        "1 of 1 outputs inconclusive, out: eager itself overflows: test; "
    )


def conv_with_dropout() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Conv2d(3, 4, 3), torch.nn.ReLU(), torch.nn.Flatten(), torch.nn.Dropout(0.2)
    ).train()


def test_a_model_that_draws_random_numbers_gets_the_channels_last_run_only(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Its draws would land on other samples with the batch reversed; in channels-last memory
    they are drawn as eager drew them (vgg11_bn's classifier dropout, CUDA)."""
    asked: list[int | None] = []

    def floors(*args: Any) -> dict[str, float]:
        asked.append(args[-1])
        return {"out": 1e6}

    monkeypatch.setattr(checking_floors, "noise_floors", floors)

    outcome = check_model(conv_with_dropout(), (torch.randn(4, 3, 6, 6),), options=RELU_BUG)

    assert outcome.status is Status.PASS, outcome.message
    assert asked == [None]
