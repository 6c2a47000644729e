"""pytorch/pytorch#185509: [inductor] Silent incorrect gradients with interpolate, conv2d,
max_pool2d and torch.where.

Forward matches eager; the gradients of input, weight and bias are wrong (up to 77 on the bias).

Reproduces: torch 2.13.0 CPU. Fixed: 2.14.1.
Measured (2.13.0, CPU): bias gradient max abs error 77, input gradient 48.9 (RMSE ratio against
fp64 3.4e6).
"""

import pytest
import torch
import torch.nn.functional as F

pytestmark = pytest.mark.realbug(issue=185509, fixed_in="2.14.1")


def features(x, weight, bias):
    y = F.interpolate(x, scale_factor=(1.5, 1.25), mode="bilinear", align_corners=False)
    y = y[:, :, 1:7, 1:8]
    conv = F.conv2d(y, weight, bias, padding=1)
    pool = F.max_pool2d(conv, kernel_size=3, stride=1, padding=1)
    return conv, pool, pool.mean(dim=(2, 3), keepdim=True)


def select(x, weight, bias, mask):
    conv, pool, _ = features(x, weight, bias)
    return torch.where(mask, conv, pool)


def arguments():
    g = torch.Generator().manual_seed(0)
    x, weight, bias = (
        torch.randn(2, 3, 6, 8, generator=g),
        torch.randn(4, 3, 3, 3, generator=g),
        torch.randn(4, generator=g),
    )
    with torch.no_grad():
        conv, _, threshold = features(x, weight, bias)
    return [x.requires_grad_(), weight.requires_grad_(), bias.requires_grad_(), conv > threshold]


def test_fixture(compile_accuracy):
    out = compile_accuracy(select, *arguments(), backward=True)
    assert out.shape == (2, 4, 6, 7)


def test_plain():
    args = arguments()
    torch.compile(select)(*args).sum().backward()
    assert all(a.grad is not None for a in args[:3])
