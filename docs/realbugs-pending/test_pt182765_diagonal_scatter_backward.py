"""pytorch/pytorch#182765: `torch.compile` silently produces all-zero `x.grad` for
`diagonal_scatter(...).sum().backward()`.

The forward is right and ``src.grad`` is right, but the gradient of ``x`` (1 off the diagonal in
eager) is all zeros under Inductor on CUDA. Same bug as #182012, which the CPU corpus rejected
because it matched eager on the CPU; the PT2 repro agent reproduced #182012 on 2.13 nightly, H100.

Reproduces: torch 2.11 CUDA (H100, Triton 3.6). Fixed: the issue is closed; fixing PR not
identified.
Measured (2.11, H100, the issue's code): ``x.grad`` 56 of 64 elements wrong (0 for 1).
Pending (docs/realbugs.md): under --compile-accuracy the fixture test came out ``unconfirmed``.
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
    out = compile_accuracy(scatter_diagonal_total, x.requires_grad_(), src.requires_grad_(), backward=True)
    assert out.shape == ()


def test_plain():
    x, src = inputs()
    x.requires_grad_()
    src.requires_grad_()
    torch.compile(scatter_diagonal_total)(x, src).backward()
    assert x.grad.shape == (8, 8)
