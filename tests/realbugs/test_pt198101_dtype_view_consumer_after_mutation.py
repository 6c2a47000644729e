"""pytorch/pytorch#198101: [inductor] Consumer of a dtype view of an input is computed after a
later in-place mutation of that input (y = x.view(int32) * 2; y.sub_(-4); x[:, 2:5] = 2; return
y.view(int64)).

Reproduces: torch 2.13.0 CPU, 2.14.1 (CPU), 2.15.0 (CPU). Fixed: not as of
2.15.0.
Measured (2.13.0, CPU): 11 of 24 int64 elements wrong (max abs error 8.6e9).
"""

import pytest
import torch

pytestmark = pytest.mark.realbug(issue=198101)


def packed_update(x):
    y = x.view(torch.int32) * 2
    y.sub_(-4)
    x[:, 2:5] = 2
    return y.view(torch.int64)


def table():
    return torch.arange(-12, 12, dtype=torch.int64).reshape(4, 6)


def test_fixture(compile_accuracy):
    out = compile_accuracy(packed_update, table())
    assert out.dtype == torch.int64


def test_plain():
    out = torch.compile(packed_update)(table())
    assert out.shape == (4, 6)
