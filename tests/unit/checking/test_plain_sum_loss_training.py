"""A training step taking the sum of a convolutional model's outputs as its loss: its convolution's
weight gradient is large (RMS about 90) and Inductor's decomposed backward rounds it about three
times eager's error, 1e-6 of its size; with the training tolerance that backward graphs are judged
with (as the fixture's training checks and PyTorch's training accuracy runs), it passes. A
backward with a real bug still fails: the step ends in a function whose backward alone has a
relu, so that the backward holds the injected relu bug on every torch, whichever relus the
partitioner recomputes there (torch 2.13 recomputes the forward's, torch 2.11 does not)."""

from __future__ import annotations

import torch
from models import ReluInBackward

from pytest_torchcompile.checking.plain import GraphChecker
from pytest_torchcompile.common.verdict import DEFAULT_TOLERANCE, TRAINING_TOLERANCE
from pytest_torchcompile.torch_internals.compiling import reset
from pytest_torchcompile.torch_internals.config import inductor_config

RELU_BUG = {"cpp.inject_relu_bug_TESTING_ONLY": "accuracy"}


def _checked_sum_loss_step(config: dict[str, str]) -> GraphChecker:
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, 64, 3, padding=1),
        torch.nn.BatchNorm2d(64),
        torch.nn.ReLU(),
        torch.nn.MaxPool2d(2),
    ).train()
    x = torch.randn(4, 3, 32, 32)
    checker = GraphChecker(
        DEFAULT_TOLERANCE,
        check_non_float=True,
        intermediates=False,
        training_tol=TRAINING_TOLERANCE,
    )
    reset()
    try:
        with inductor_config(config), checker.watching():
            torch.compile(lambda x: ReluInBackward.apply(model(x)))(x).sum().backward()
    finally:
        reset()
    return checker


def test_a_sum_loss_training_step_without_a_bug_passes() -> None:
    checker = _checked_sum_loss_step({})
    assert checker.tally.failures == [] and checker.tally.unchecked == []
    assert sorted(checker.tally.judged) == [0, 1]


def test_a_sum_loss_training_step_with_a_backward_bug_fails() -> None:
    checker = _checked_sum_loss_step(RELU_BUG)
    assert any(failure.graph.kind == "backward" for failure in checker.tally.failures), (
        checker.tally.failures
    )
