"""pytorch/pytorch#156786: [inductor] an ``index_add`` (``index_put`` with ``accumulate=True``)
whose source is a slice of the tensor it adds into: the reinplace pass makes it in-place, so the
second row added reads the first row's already updated values.

The issue reports ``index_copy`` with ``source=self``; the hunt found this ``index_add`` of a
slice (the 197th program of its seed 0) and the same slice through ``index_copy`` fails alike.
Fixed by making the pass check every operand ``index_put`` reads (pytorch/pytorch#185450).

Reproduces: torch 2.13.0 CPU, 2.14.1 (CPU). Fixed: 2.15.0.
Measured (2.13.0, CPU): 4 of 15 elements wrong, max abs error 8.
"""

import pytest
import torch

pytestmark = pytest.mark.realbug(issue=156786, fixed_in="2.15.0")


def fold_first_rows(x, index):
    y = x * 2
    return y.index_add(0, index, y.narrow(0, 0, 2))


def inputs():
    return torch.arange(15.0).view(3, 5), torch.tensor([1, 0])


def test_fixture(compile_accuracy):
    out = compile_accuracy(fold_first_rows, *inputs())
    assert out.shape == (3, 5)


def test_plain():
    out = torch.compile(fold_first_rows)(*inputs())
    assert out.shape == (3, 5)
