"""pytorch/pytorch#182765: `torch.compile` silently produces all-zero `x.grad` for
`diagonal_scatter(...).sum().backward()` on CUDA.

The forward is right and ``src.grad`` is right; the gradient of ``x`` (1 off the diagonal in eager)
is not. The backward graph is ``diagonal_scatter(tangent.expand(8, 8), zeros)``: its traced value
keeps the expanded input's (0, 0) strides, and Inductor lays an output the user sees out with its
traced strides, so all 64 elements share one. The same graph compiled without AOT autograd's mark
of the outputs the user sees is right: a repro that drops the mark does not reproduce.

Reproduces: torch 2.11 CUDA (H100, Triton 3.6). Not on the CPU (torch 2.13: the traced strides
there are (8, 1)). Fixed: the issue is closed; the fixing PR was not identified.
Measured (2.11, H100): 56 of 64 elements of ``x.grad`` wrong, max abs error 1 (eager's error 0).
"""

import pytest
import torch

pytestmark = [
    pytest.mark.realbug(issue=182765),
    pytest.mark.cuda,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA"),
]


def scatter_diagonal_total(x, src):
    return torch.diagonal_scatter(x, src, 0).sum()


def inputs():
    g = torch.Generator().manual_seed(0)
    return torch.randn(8, 8, generator=g).cuda(), torch.randn(8, generator=g).cuda()


def test_fixture(compile_accuracy):
    x, src = inputs()
    out = compile_accuracy(
        scatter_diagonal_total, x.requires_grad_(), src.requires_grad_(), backward=True
    )
    assert out.shape == ()


def test_plain():
    x, src = inputs()
    x.requires_grad_()
    src.requires_grad_()
    torch.compile(scatter_diagonal_total)(x, src).backward()
    assert x.grad.shape == (8, 8)
