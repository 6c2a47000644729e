"""pytorch/pytorch#198270: [inductor] x.index_put_(...) followed by x.add_(x.flip(0)): the copy
back into x is fused with a read of x at other positions (silent wrong results, CUDA and CPU).

Compiled with ``dynamic=True``; wrong at every size on CPU.

Reproduces: torch 2.13.0 CPU (static and dynamic shapes), 2.14.1 (CPU). Fixed: 2.15.0.
Measured (2.13.0, CPU, 6x8): max abs error 1.9, RMSE ratio against fp64 1.5e7.
"""

import pytest
import torch

pytestmark = pytest.mark.realbug(issue=198270, fixed_in="2.15.0")


def symmetrize(x):
    x.index_put_((torch.arange(x.size(0)),), x * 2.0)
    x.add_(x.flip(0))
    return x


def grid():
    return torch.rand(6, 8, generator=torch.Generator().manual_seed(0))


def test_fixture(compile_accuracy):
    out = compile_accuracy(symmetrize, grid(), dynamic=True)
    assert out.shape == (6, 8)


def test_plain():
    out = torch.compile(symmetrize, dynamic=True)(grid())
    assert out.shape == (6, 8)
