"""pytorch/pytorch#175966: Silently incorrect results for torch.arange + Inductor.

An int64 ``arange`` times an int64 tensor holding 1e9: the compiled kernel computes the product
in 32 bits and wraps around (3e9 comes out as -1294967296). The graph computes from constants
only; its input is unused.

Reproduces: torch 2.13.0 CPU, 2.14.1 (CPU), 2.15.0 (CPU). Fixed: not as of
2.15.0.
Measured (2.13.0, CPU): 8 of 11 int64 elements wrong, max abs error 8.59e9.
"""

import pytest
import torch

pytestmark = pytest.mark.realbug(issue=175966)


def offsets(x):
    return torch.arange(0, 11, dtype=torch.int64) * torch.tensor([int(1e9)], dtype=torch.int64)


def test_fixture(compile_accuracy):
    out = compile_accuracy(offsets, torch.zeros(1))
    assert out.shape == (11,)


def test_plain():
    out = torch.compile(offsets)(torch.zeros(1))
    assert out.dtype == torch.int64
