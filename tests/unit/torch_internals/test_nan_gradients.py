"""Gradients at NaN values are filled where a tensor an op reads is NaN, and only there: the
gradients that depend on such a value are what two runs filled unlike tell apart."""

from __future__ import annotations

import math

import torch

from pytest_torchcompile.torch_internals.nan_gradients import nan_gradients_filled

NAN = math.nan


def _gradient(call: object, x: torch.Tensor, fill: float) -> tuple[torch.Tensor, list[int]]:
    filled: list[int] = []
    leaf = x.clone().requires_grad_()
    output = nan_gradients_filled(call, fill, filled)(leaf)  # type: ignore[arg-type]
    (grad,) = torch.autograd.grad(output.sum(), [leaf])
    return grad, filled


def _hardtanh(x: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.hardtanh(x % -3, -1, 2)


def test_a_nan_input_gets_the_fill_and_the_rest_its_gradient() -> None:
    x = torch.linspace(-0.5, 0.5, 65)
    x[26] = x[64] = NAN
    plain = torch.autograd.grad(_hardtanh(leaf := x.clone().requires_grad_()).sum(), [leaf])[0]
    grad, filled = _gradient(_hardtanh, x, 7.0)
    assert filled == [2, 2]  # x, read by %, and x % -3, read by hardtanh
    assert grad[26] == grad[64] == 7.0
    kept = torch.ones(65, dtype=torch.bool)
    kept[[26, 64]] = False
    assert torch.equal(grad[kept], plain[kept])


def test_a_window_reduced_to_a_nan_fills_the_whole_window() -> None:
    def pooled(x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.hardtanh(torch.nn.functional.avg_pool1d(x, 3), -1, 2)

    x = torch.full((1, 1, 9), 0.25)
    x[0, 0, 4] = NAN
    grad, _ = _gradient(pooled, x, NAN)
    assert torch.isnan(grad[0, 0, 3:6]).all()
    assert not torch.isnan(grad[0, 0, :3]).any() and not torch.isnan(grad[0, 0, 6:]).any()


def test_a_nan_result_summed_outside_leaves_the_gradients_alone() -> None:
    x = torch.tensor([1.0, NAN, 3.0])
    grad, filled = _gradient(lambda t: t.exp().log(), x, 7.0)
    # exp's and log's inputs are NaN at 1: filled there; the NaN sum built outside is not watched.
    assert filled == [1, 1]
    assert grad[0] == grad[2] == 1.0 and grad[1] == 7.0


def test_without_a_nan_nothing_is_filled() -> None:
    grad, filled = _gradient(_hardtanh, torch.linspace(-3, 3, 10), NAN)
    assert filled == [] and not torch.isnan(grad).any()
