"""pytorch/pytorch#191499: [Inductor][CPU] torch.compile returns 0 for short positive uint8/int8
amin reductions on Apple Silicon.

Not only Apple Silicon (comment in the thread): on x86-64 a uint8/int8 min over 16 or more
elements returns 0 when all values are positive (and max returns 0 when all are negative), with
static and dynamic shapes alike. Here a row-wise ``amin`` of int8 rows of 36 elements, compiled
with ``dynamic=True``.

Reproduces: torch 2.13.0 CPU (AVX-512), 2.14.1 (CPU), 2.15.0 (CPU, AVX-512). Fixed: not as of
2.15.0. Not on an AVX2-only CPU (an AMD EPYC, torch 2.13.0): there the compiled minima are right.
Measured (2.13.0, CPU): all 4 row minima wrong (0 instead of 1), max abs error 1.
"""

import pytest
import torch

pytestmark = pytest.mark.realbug(issue=191499)
NEEDS_CPU_CAPABILITY = "AVX512"

ROW = [5, 1, 100, 3, 7, 8, 9, 13, 100, 120, 127, 2, 6, 4, 11, 12, 90, 80]


def row_min(x):
    return torch.amin(x, dim=1)


def batch():
    return torch.tensor(ROW, dtype=torch.int8).repeat(4, 2)


def test_fixture(compile_accuracy):
    out = compile_accuracy(row_min, batch(), dynamic=True)
    assert out.shape == (4,)


def test_plain():
    out = torch.compile(row_min, dynamic=True)(batch())
    assert out.shape == (4,)
