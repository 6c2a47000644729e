"""Inputs laid out as a graph's placeholders were traced: only where a call's layout differs and
the traced sizes and strides are concrete; values, dtype and requires_grad kept."""

from __future__ import annotations

import torch
from torch.fx.experimental.proxy_tensor import make_fx

from pytest_torchcompile.judging.copies import traced_layout


def _flattened(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return x.view(-1) + y


def test_inputs_in_another_layout_are_copied_into_the_traced_one() -> None:
    x, y = torch.randn(2, 3, 4, 5), torch.randn(120)
    gm = make_fx(_flattened)(x, y)
    channels_last = x.contiguous(memory_format=torch.channels_last).requires_grad_()
    relaid = traced_layout(gm, [channels_last, y])
    assert relaid is not None and relaid[1] is y
    assert (
        relaid[0].stride() == x.stride() and torch.equal(relaid[0], x) and relaid[0].requires_grad
    )
    assert torch.equal(gm(*relaid), _flattened(x, y))


def test_inputs_already_in_the_traced_layout_or_a_graph_without_traced_values_give_none() -> None:
    x, y = torch.randn(2, 3, 4, 5), torch.randn(120)
    assert traced_layout(make_fx(_flattened)(x, y), [x, y]) is None
    channels_last = x.contiguous(memory_format=torch.channels_last)
    assert traced_layout(torch.fx.symbolic_trace(_flattened), [channels_last, y]) is None
