"""pytorch/pytorch#197089: [inductor][cpu] torch.std/var accumulate in float32: inf/NaN for
1e30-scale inputs, and zero output with an all-zero gradient for 1e-30-scale inputs (eager and
float64 are correct).

For values distributed as N(1e5, 1) CPU eager (which accumulates in double) gives the standard
deviation to 5e-8, Inductor's float32 Welford to 3e-3. Compiled here with
``mode="max-autotune"``, which keeps the bug.

Reproduces: torch 2.13.0 CPU (default and max-autotune), 2.14.1 (CPU), 2.15.0 (CPU). Fixed: not as of
2.15.0.
Measured (2.13.0, CPU): max abs error 5.1e-4 on values near 1, RMSE ratio against fp64 1.7e4.
"""

import pytest
import torch

pytestmark = pytest.mark.realbug(issue=197089)


def row_std(x):
    return torch.std(x, dim=-1)


def readings():
    return torch.randn(4, 4096, generator=torch.Generator().manual_seed(0)) + 1e5


@pytest.mark.inductor_repro(mode="max-autotune")
def test_fixture(compile_accuracy):
    out = compile_accuracy(row_std, readings())
    assert out.shape == (4,)


def test_plain():
    out = torch.compile(row_std, mode="max-autotune")(readings())
    assert out.shape == (4,)
