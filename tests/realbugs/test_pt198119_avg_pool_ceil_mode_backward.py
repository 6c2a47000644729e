"""pytorch/pytorch#198119: [inductor] avg_pool1d/2d backward with ceil_mode=True divides the
overhanging last window by the full kernel size, so the compiled gradient is wrong where eager
and aot_eager agree; forward is correct.

Written as a user checking the gradients of a function: nothing requires grad in the fixture
call (the gradients meant are those with respect to the floating input).

Reproduces: torch 2.13.0 CPU, 2.14.1 (CPU), 2.15.0 (CPU). Fixed: not as of
2.15.0.
Measured (2.13.0, CPU): input gradient max abs error 0.25, RMSE ratio against fp64 7.2e6.
"""

import pytest
import torch
import torch.nn.functional as F

pytestmark = pytest.mark.realbug(issue=198119)


def pool(x):
    return F.avg_pool2d(x, 3, 2, ceil_mode=True)


def image():
    return torch.randn(1, 2, 6, 6, generator=torch.Generator().manual_seed(0))


def test_fixture(compile_accuracy):
    out = compile_accuracy(pool, image(), backward=True)
    assert out.shape == (1, 2, 3, 3)


def test_plain():
    x = image().requires_grad_()
    torch.compile(pool)(x).sum().backward()
    assert x.grad.shape == x.shape
