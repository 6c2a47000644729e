"""Judging a plain ``torch.compile`` call leaves the user's state as the call left it: a compiled
optimizer step holds the parameters it updates as constants of its torch-level graph (Dynamo's
static addresses), and no eager or fp64 rerun of that graph may update them again."""

from __future__ import annotations

import torch

from pytest_torchcompile.checking.plain import GraphChecker
from pytest_torchcompile.common.verdict import DEFAULT_TOLERANCE
from pytest_torchcompile.torch_internals.compiling import reset


def test_a_compiled_optimizer_step_updates_the_parameters_once() -> None:
    x, y = torch.nn.Parameter(torch.ones(3)), torch.nn.Parameter(torch.ones(3))
    optimizer = torch.optim.SGD([x, y], lr=1)

    def step() -> None:
        optimizer.zero_grad()
        (x + y).sum().backward()
        optimizer.step()

    checker = GraphChecker(DEFAULT_TOLERANCE, check_non_float=True, intermediates=True)
    with checker.watching():
        torch.compile(step)()
    reset()
    assert torch.equal(x.detach(), torch.zeros(3)) and torch.equal(y.detach(), torch.zeros(3))
    assert checker.tally.failures == []
