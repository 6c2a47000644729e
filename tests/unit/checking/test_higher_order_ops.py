"""A model calling a higher-order op (``torch.cond``) is judged: the eager runs' dispatch mode
that fills memory no op wrote lets it through, as does the fp64 run's; it raised "no rule
registered for HigherOrderOperator cond", and the check was ``eager_fail``."""

from __future__ import annotations

import torch

from pytest_torchcompile.checking.model import check_model
from pytest_torchcompile.common.settings import CheckOptions
from pytest_torchcompile.common.verdict import Status


def branching(x: torch.Tensor) -> torch.Tensor:
    return torch.cond(x.sum() > 0, lambda y: (y * 3).relu(), lambda y: y.cos(), (x,))


def test_a_model_calling_cond_is_judged_against_fp64() -> None:
    outcome = check_model(branching, (torch.linspace(-1, 2, 64),))
    assert outcome.status is Status.PASS, outcome.message
    assert outcome.reference == "fp64"


def test_a_miscompiled_branch_of_cond_fails() -> None:
    outcome = check_model(
        branching,
        (torch.linspace(-1, 2, 64),),
        options=CheckOptions(inductor_config={"cpp.inject_relu_bug_TESTING_ONLY": "accuracy"}),
    )
    assert outcome.status is Status.FAIL_ACCURACY, outcome.message
