"""A gradient through a NaN is no value: eager's CPU kernels give ``hardtanh``'s backward at a NaN
as 0 in the vectorized body and as the incoming gradient in the scalar tail, compiled code gives
the incoming gradient everywhere. Those elements are left out of a training graph's judging; a
wrong gradient anywhere else still fails it, as it fails without a NaN."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import pytest
import torch
import torch.fx

from pytest_torchcompile.common.kinds import FailureKind
from pytest_torchcompile.judging.judge import DYNAMO, judge_graph
from pytest_torchcompile.judging.references import nan_dependent_gradients

SIZE, NANS = 65, (26, 64)
"""A tensor of 65 float32 elements has a vectorized body and a scalar tail on every CPU."""


class Clipped(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor]:
        return (torch.nn.functional.hardtanh(x % -3, -1, 2),)


def _inputs(nans: Sequence[int] = NANS) -> list[torch.Tensor]:
    x = torch.linspace(-0.9, 1.9, SIZE)
    x[list(nans)] = math.nan
    return [x.requires_grad_()]


class _GradientBumped(torch.autograd.Function):
    """The identity, whose backward adds ``bump`` to the gradient."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, bump: torch.Tensor) -> torch.Tensor:
        ctx.bump = bump
        return x.clone()

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None]:
        return grad + ctx.bump, None


def _with_gradient_off(at: int, by: float) -> Callable[..., Any]:
    """Compiled code whose gradient is ``by`` off at element ``at``, its outputs unchanged."""

    def compiler(gm: torch.fx.GraphModule, inputs: Sequence[Any]) -> Callable[..., Any]:
        bump = torch.zeros(SIZE)
        bump[at] = by
        return lambda x: gm(_GradientBumped.apply(x, bump))

    return compiler


def _judge(inputs: list[torch.Tensor], **kwargs: Any) -> Any:
    return judge_graph(
        torch.fx.symbolic_trace(Clipped()), inputs, 1e-4, True, level=DYNAMO, **kwargs
    )


def test_eager_itself_gives_no_one_gradient_at_a_nan() -> None:
    (x,) = _inputs()
    (grad,) = torch.autograd.grad(Clipped()(x)[0].sum(), [x])
    assert grad[NANS[0]] != grad[NANS[1]], "eager's kernel no longer splits body and tail"


def test_the_gradients_through_a_nan_are_the_ones_left_out() -> None:
    masks = nan_dependent_gradients(Clipped(), _inputs())
    assert masks is not None and masks[0] is None  # the forward result is judged whole
    assert masks[1] is not None and masks[1].nonzero().flatten().tolist() == list(NANS)
    assert nan_dependent_gradients(Clipped(), _inputs(nans=())) is None


def test_inductor_at_a_nan_input_passes() -> None:
    verdict = _judge(_inputs())
    assert verdict.failure is None, verdict.leaves


@pytest.mark.parametrize("nans", [NANS, ()], ids=["nan elsewhere", "no nan"])
def test_a_wrong_gradient_elsewhere_still_fails(nans: Sequence[int]) -> None:
    verdict = _judge(_inputs(nans), compiler=_with_gradient_off(at=5, by=1e-3))
    assert verdict.failure == FailureKind.ACCURACY
    assert [leaf.passed for leaf in verdict.leaves] == [True, False]


def test_a_wrong_gradient_at_the_nan_is_not_judged() -> None:
    verdict = _judge(_inputs(), compiler=_with_gradient_off(at=NANS[0], by=1.0))
    assert verdict.failure is None


def test_without_a_nan_among_inputs_and_results_nothing_is_run() -> None:
    calls: list[int] = []

    def counted(x: torch.Tensor) -> tuple[torch.Tensor]:
        calls.append(1)
        return Clipped()(x)

    results = [torch.zeros(SIZE), torch.ones(SIZE)]
    assert nan_dependent_gradients(counted, _inputs(nans=()), results=results) is None
    assert calls == []
    assert nan_dependent_gradients(counted, _inputs(), results=results) is not None
    assert len(calls) == 2
