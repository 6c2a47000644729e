"""pytorch/pytorch#187935: [Inductor][CUDA] torch.signbit loses negative zero sign for float64
inputs.

Inductor's Triton codegen uses ``libdevice.signbit`` only for float32 and ``x < 0`` for other
dtypes, so ``signbit(-0.0)`` is False for float64 on CUDA (eager: True).

Reproduces: torch 2.11 CUDA (H100, Triton 3.6) (the ``x < 0`` fallback is still
in the 2.13 source). Fixed: the issue is closed, but torch 2.13's Triton codegen still has the
fallback; fixing PR not identified.
Measured (2.11, H100): 2 of 6 float64 signbits wrong (the negative zeros).
"""

import pytest
import torch

pytestmark = [
    pytest.mark.realbug(issue=187935),
    pytest.mark.cuda,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA"),
]


def negative(x):
    return torch.signbit(x)


def values():
    return torch.tensor([[1.0, -0.0, 0.0], [-1.0, -0.0, 2.5]], dtype=torch.float64, device="cuda")


def test_fixture(compile_accuracy):
    out = compile_accuracy(negative, values())
    assert out.shape == (2, 3)


def test_plain():
    out = torch.compile(negative, fullgraph=True)(values())
    assert out.shape == (2, 3)
