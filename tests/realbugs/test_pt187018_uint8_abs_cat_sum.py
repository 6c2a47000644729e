"""pytorch/pytorch#187018: abs on uint8 silently miscompiled via std::abs integer promotion.

``-x.abs()`` of uint8 values flowing through ``cat`` and ``sum``: the C++ kernel's ``std::abs``
promotes the byte to int, so the negation no longer wraps around. Compiled here with the C++
wrapper (``cpp_wrapper=True``), which keeps the bug.

Reproduces: torch 2.13.0 CPU (default and cpp_wrapper). Fixed: 2.14.1.
Measured (2.13.0, CPU): the int64 sum is -800 instead of 224 (abs error 1024).
"""

import pytest
import torch

pytestmark = pytest.mark.realbug(issue=187018, fixed_in="2.14.1")


def doubled_negated_sum(x):
    y = -x.abs()
    return torch.cat([y, y]).sum()


@pytest.mark.inductor_repro(inductor_config={"cpp_wrapper": True})
def test_fixture(compile_accuracy):
    out = compile_accuracy(doubled_negated_sum, torch.tensor([200, 200], dtype=torch.uint8))
    assert out.dtype == torch.int64


def test_plain():
    compiled = torch.compile(doubled_negated_sum, options={"cpp_wrapper": True})
    out = compiled(torch.tensor([200, 200], dtype=torch.uint8))
    assert out.dtype == torch.int64
