"""pytorch/pytorch#186799: torch.compile silently produces wrong gradient for
atan2(x, y).amin(dim) on float32.

The gradient at the argmin positions is dropped (0.0) instead of receiving the upstream value;
forward is exact, aot_eager is correct.

Reproduces: torch 2.13.0 CPU, 2.14.1 (CPU), 2.15.0 (CPU). Fixed: not as of
2.15.0.
Measured (2.13.0, CPU): gradient of x max abs error 0.137, RMSE ratio against fp64 9.4e6.
"""

import pytest
import torch

pytestmark = pytest.mark.realbug(issue=186799)


def angle_min(x, y):
    return torch.atan2(x, y).amin(dim=-1)


def points():
    g = torch.Generator().manual_seed(0)
    return torch.randn(2, 3, generator=g), torch.randn(2, 3, generator=g)


def test_fixture(compile_accuracy):
    x, y = points()
    out = compile_accuracy(angle_min, x.requires_grad_(), y, backward=True)
    assert out.shape == (2,)


def test_plain():
    x, y = points()
    x.requires_grad_()
    torch.compile(angle_min)(x, y).sum().backward()
    assert x.grad.shape == (2, 3)
