"""pytorch/pytorch#195007: [torch.compile][Inductor] frexp returns a mantissa of 0 for float32
subnormals on CUDA.

``triton_helpers.frexp`` works in floating point (``x == 0``, ``libdevice.ilogb``/``ldexp``)
under flush-to-zero, so a float32 subnormal gives mantissa 0 and exponent 0 instead of e.g.
(0.544, -132) for 1e-40.

Reproduces: torch 2.11 CUDA (H100, Triton 3.6) (the helper is unchanged in
2.13). Fixed: pytorch/pytorch#195041 (August 2026, after 2.11).
Measured (2.11, H100): 3 of 5 mantissas (max abs error 0.70) and 3 of 5 exponents wrong.
"""

import pytest
import torch

pytestmark = [
    pytest.mark.realbug(issue=195007),
    pytest.mark.cuda,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA"),
]


def split_float(x):
    mantissa, exponent = torch.frexp(x)
    return mantissa, exponent


def tiny():
    return torch.tensor([1e-40, -3e-39, 0.75, 8.0, 1e-42], device="cuda")


def test_fixture(compile_accuracy):
    mantissa, exponent = compile_accuracy(split_float, tiny())
    assert mantissa.shape == exponent.shape == (5,)


def test_plain():
    mantissa, exponent = torch.compile(split_float)(tiny())
    assert mantissa.shape == exponent.shape == (5,)
