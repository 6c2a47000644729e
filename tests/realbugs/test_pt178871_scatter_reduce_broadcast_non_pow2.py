"""pytorch/pytorch#178871: Incorrect output for non-power-of-2-sized fusion of scalar broadcast and
scatter-add.

When Inductor fuses a scalar broadcast (``x + bias``) with ``scatter_reduce(..., "sum")`` into a
size-1 output, the Triton kernel's ``tl.atomic_add`` has no mask, so the ``XBLOCK - N``
out-of-range lanes also add the broadcast scalar: the sum is off by
``(next_power_of_2(N) - N) * bias``. CUDA only (Triton codegen). Here N = 5, bias 0.5: off by 1.5.

Reproduces: torch 2.11 CUDA (H100, Triton 3.6). Fixed: pytorch/pytorch#179833
(merged April 2026, after the 2.11 branch cut; the issue is closed).
Measured (2.11, H100): the sum off by 1.5 for N=5 (0.5 for N=7, 15.5 for N=33); RMSE ratio
against fp64 8.4e6 to 1.6e7.
"""

import pytest
import torch

pytestmark = [
    pytest.mark.realbug(issue=178871),
    pytest.mark.cuda,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA"),
]


def scatter_total(x, bias, idx):
    src = x + bias
    out = torch.zeros(1, 1, device=x.device, dtype=x.dtype)
    return out.scatter_reduce(0, idx.unsqueeze(-1).expand_as(src), src, "sum", include_self=True)


def inputs():
    x = torch.randn(5, 1, generator=torch.Generator().manual_seed(0)).cuda()
    bias = torch.tensor([0.5], device="cuda")
    idx = torch.zeros(5, dtype=torch.long, device="cuda")
    return x, bias, idx


def test_fixture(compile_accuracy):
    out = compile_accuracy(scatter_total, *inputs())
    assert out.shape == (1, 1)


def test_plain():
    out = torch.compile(scatter_total, fullgraph=True, dynamic=False)(*inputs())
    assert out.shape == (1, 1)
