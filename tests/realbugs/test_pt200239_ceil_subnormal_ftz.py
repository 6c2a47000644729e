"""pytorch/pytorch#200239: [Inductor][CUDA] FTZ on subnormal inputs causes O(1) errors in
ceil(float32) and atan2(bfloat16).

Triton kernels are compiled with flush-to-zero, so a float32 subnormal input reads as 0:
``ceil(1e-40)`` is 0 compiled and 1 in eager (and in fp64). The atan2(bfloat16) half of the
issue is in ``.cudabugs/check_pt200239.py`` only.

Reproduces: torch 2.11 CUDA (H100, Triton 3.6). Fixed: not known (the thread
was not read, only its title; filed after 2.11).
Measured (2.11, H100): float32 ``ceil`` of subnormals 0 for 1 in 3 of 5 elements; bf16
``atan2`` of subnormals off by up to 0.785 (RMSE ratio 2.7e3).
"""

import pytest
import torch

pytestmark = [
    pytest.mark.realbug(issue=200239),
    pytest.mark.cuda,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA"),
]


def round_up(x):
    return torch.ceil(x)


def tiny():
    return torch.tensor([1e-40, 3e-39, -1e-40, 0.5, 1e-39], device="cuda")


def test_fixture(compile_accuracy):
    out = compile_accuracy(round_up, tiny())
    assert out.shape == (5,)


def test_plain():
    out = torch.compile(round_up)(tiny())
    assert out.shape == (5,)
