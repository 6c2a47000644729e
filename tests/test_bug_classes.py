"""Classes of real Inductor bugs the plugin once handled wrongly (tests/realbugs shows each):
gradients of a function whose inputs do not require grad, ..."""

from __future__ import annotations

import pytest
import torch

from pytest_torchcompile.checking.model import check_model
from pytest_torchcompile.run.settings import CheckOptions
from pytest_torchcompile.run.verdict import Status

RELU_BUG = {"cpp.inject_relu_bug_TESTING_ONLY": "accuracy"}


class ReluInBackward(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):  # type: ignore[override]
        return x * 2

    @staticmethod
    def backward(ctx, grad):  # type: ignore[override]
        return grad.relu() * 2


def doubled_sine(x: torch.Tensor, steps: torch.Tensor) -> torch.Tensor:
    return ReluInBackward.apply(x).sin() * steps


def test_backward_without_grad_inputs_differentiates_the_floating_inputs() -> None:
    x = torch.randn(16, 8, generator=torch.Generator().manual_seed(0))
    steps = torch.arange(8)
    clean = check_model(doubled_sine, (x, steps), options=CheckOptions(backward=True))
    assert clean.status is Status.PASS, clean.message
    assert "grad['args[0]']" in {leaf.path for leaf in clean.comparison.leaves}
    assert "gradients taken with respect to the floating inputs args[0]" in clean.message
    assert not x.requires_grad, "the caller's tensor is left as it was"
    broken = check_model(doubled_sine, (x, steps), options=CheckOptions(backward=True, inductor_config=RELU_BUG))
    assert broken.status is Status.FAIL_ACCURACY, broken.message
    assert "grad['args[0]']" in {leaf.path for leaf in broken.comparison.failing}


def test_backward_without_anything_to_differentiate_is_a_usage_error_not_an_eager_failure() -> None:
    with pytest.raises(ValueError, match=r"backward=True needs .*floating inputs"):
        check_model(lambda n: n * 2, (torch.arange(4),), options=CheckOptions(backward=True))
