"""pytorch/pytorch#198131: [inductor] ``dst[:] = src[:]; src.add_(1)`` copies the *updated*
``src`` into ``dst`` (remove_noop_ops replaces a copy of an input by the input itself, which is
mutated before the copy's user runs).

The wrong value is in a mutated input (``dst``), not in the returned tensor.

Reproduces: torch 2.13.0 CPU, 2.14.1 (CPU). Fixed: 2.15.0.
Measured (2.13.0, CPU): every element of ``dst`` off by 1 (max abs error 1).
"""

import pytest
import torch

pytestmark = pytest.mark.realbug(issue=198131, fixed_in="2.15.0")


def snapshot_then_step(dst, src):
    dst[0:, :] = src[0:, :]
    src.add_(1)
    return src


def buffers():
    return torch.zeros(3, 4), torch.arange(12.0).view(3, 4)


def test_fixture(compile_accuracy):
    out = compile_accuracy(snapshot_then_step, *buffers())
    assert out.shape == (3, 4)


def test_plain():
    dst, src = buffers()
    torch.compile(snapshot_then_step)(dst, src)
    assert dst.shape == src.shape
