"""pytorch/pytorch#188048: [Inductor][CUDA] torch.div(rounding_mode="floor") mismatches eager for
infinite inputs.

Inductor lowers float floor division to ``floor(a / b)``; eager's ``div_floor`` goes through
``fmod``: ``inf // 1`` is NaN in eager and inf compiled, ``1 // -inf`` is -1 in eager and -0
compiled.

Reproduces: torch 2.11 CUDA (H100, Triton 3.6) (the lowering is unchanged in
2.13). Fixed: the issue is closed; fixing PR not identified.
Measured (2.11, H100): float32 and float64 alike, ``a // b`` has 2 of 4 NaN/inf patterns wrong,
``b // a`` 1 of 4 values wrong by 1 (-0 for -1).
"""

import pytest
import torch

pytestmark = [
    pytest.mark.realbug(issue=188048),
    pytest.mark.cuda,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA"),
]


def floor_both_ways(a, b):
    return torch.div(a, b, rounding_mode="floor"), torch.div(b, a, rounding_mode="floor")


def operands():
    inf, nan = float("inf"), float("nan")
    a = torch.tensor([nan, inf, -inf, 3.0], dtype=torch.float64, device="cuda")
    return a, torch.tensor([1.0, 1.0, 1.0, 2.0], dtype=torch.float64, device="cuda")


def test_fixture(compile_accuracy):
    q, r = compile_accuracy(floor_both_ways, *operands())
    assert q.shape == r.shape == (4,)


def test_plain():
    q, r = torch.compile(floor_both_ways, fullgraph=True)(*operands())
    assert q.shape == r.shape == (4,)
