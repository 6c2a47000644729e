"""A plain ``torch.compile`` call given a tensor subclass is judged as it runs: the graph's first
call runs inside AOT autograd's dispatch mode that checks custom ops for aliasing, which answers
NotImplemented for any tensor type it does not know, and copying the call's inputs for judging
must not run through it (tensordict's UnbatchedTensor raised "Multiple dispatch failed for
aten.detach" there, in the test's own call, under --compile-accuracy only)."""

from __future__ import annotations

import torch

from pytest_torchcompile.checking.plain import GraphChecker
from pytest_torchcompile.common.verdict import DEFAULT_TOLERANCE
from pytest_torchcompile.torch_internals.compiling import reset


class Tagged(torch.Tensor):
    """A tensor subclass with torch's default behaviour, as libraries derive them."""


def double(x: torch.Tensor) -> torch.Tensor:
    return x * 2


def test_a_call_given_a_tensor_subclass_is_judged() -> None:
    x = torch.linspace(-1, 1, 8).as_subclass(Tagged)
    checker = GraphChecker(DEFAULT_TOLERANCE, check_non_float=True, intermediates=True)
    with checker.watching():
        out = torch.compile(double, fullgraph=True)(x)
    reset()
    assert torch.equal(out.as_subclass(torch.Tensor), torch.linspace(-2, 2, 8))
    assert checker.tally.failures == [] and checker.tally.judged
