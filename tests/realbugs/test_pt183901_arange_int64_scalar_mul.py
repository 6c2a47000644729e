"""pytorch/pytorch#183901: torch.compile produces int32-overflowed results for int64 arange
multiplication on CUDA.

Reported for CUDA; the C++ backend wraps around the same way: ``arange(n) * 1500000000`` in
int64 is computed in 32 bits. Here the product is added to an int64 input, so the graph has a
real input (compare #175966, whose graph computes from constants only).

Reproduces: torch 2.13.0 CPU, 2.14.1 (CPU), 2.15.0 (CPU). Fixed: not as of
2.15.0.
Measured (2.13.0, CPU): 7 of 9 int64 elements wrong, max abs error 1.29e10.
"""

import pytest
import torch

pytestmark = pytest.mark.realbug(issue=183901)


def strided_offsets(base):
    return base + torch.arange(base.numel(), dtype=torch.int64) * 1500000000


def test_fixture(compile_accuracy):
    out = compile_accuracy(strided_offsets, torch.zeros(9, dtype=torch.int64))
    assert out.shape == (9,)


def test_plain():
    out = torch.compile(strided_offsets)(torch.zeros(9, dtype=torch.int64))
    assert out.dtype == torch.int64
