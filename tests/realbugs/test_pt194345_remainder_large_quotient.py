"""pytorch/pytorch#194345: [inductor][cuda] `torch.remainder` / `torch.fmod` wrong results under
`torch.compile` on CUDA for large |a/b| ratios.

Eager CUDA computes an exact remainder (``fmod`` with a sign fix); Inductor's Triton kernel uses
the float ``%`` operator, which is wrong once ``a / b`` is large: ``1e10 % 1e-20`` is 166.87
compiled against 2.6e-21 in eager (both operands normal float32 values).

Reproduces: torch 2.11 CUDA (H100, Triton 3.6); reported on 2.13.0+cu130 and
2.15 nightly. Fixed: not as of the thread (open).
Measured (2.11, H100): ``remainder`` of normal operands off by up to 167 (2 of 2 wrong); with a
subnormal divisor, ``remainder`` and ``fmod`` give a wrong NaN/inf pattern.
"""

import pytest
import torch

pytestmark = [
    pytest.mark.realbug(issue=194345),
    pytest.mark.cuda,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA"),
]


def wrap(x, y):
    return torch.remainder(x, y)


def operands():
    return torch.tensor([1e10, 65504.0], device="cuda"), torch.tensor([1e-20, 6e-8], device="cuda")


def test_fixture(compile_accuracy):
    out = compile_accuracy(wrap, *operands())
    assert out.shape == (2,)


def test_plain():
    out = torch.compile(wrap)(*operands())
    assert out.shape == (2,)
