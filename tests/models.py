"""Models more than one test module checks. ``tests/`` is on ``sys.path`` through its conftest."""

from __future__ import annotations

import torch


def sin_relu_cos(x: torch.Tensor) -> torch.Tensor:
    """A relu between 20 sines and 40 cosines: a wrong relu is masked at the output."""
    for _ in range(20):
        x = x.sin()
    x = x.relu()
    for _ in range(40):
        x = x.cos()
    return x


class ReluInBackward(torch.autograd.Function):
    """Doubles forward; its backward has a relu, so that only a compiled backward shows a relu bug."""

    @staticmethod
    def forward(ctx, x):  # type: ignore[override]
        return x * 2

    @staticmethod
    def backward(ctx, grad):  # type: ignore[override]
        return grad.relu() * 2
