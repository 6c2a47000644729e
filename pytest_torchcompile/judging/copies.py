"""Copies of a graph's inputs for its runs: detached, in their own memory, with their size, stride
and storage offset, or laid out as the graph was traced; widened for an fp64 run.

Embedded in every full repro file with ``judge.py``: torch and the standard library only.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from pytest_torchcompile.torch_internals.views import unviewed, viewed


def clone_values(values: Sequence[Any], keep_grad: bool = False) -> list[Any]:
    """Detached copies of the tensors (:func:`strided_copy`); ``keep_grad`` makes those that
    required grad leaves that do."""
    return [
        (
            strided_copy(v).requires_grad_(keep_grad and v.requires_grad)
            if isinstance(v, torch.Tensor)
            else v
        )
        for v in values
    ]


def strided_copy(value: torch.Tensor) -> torch.Tensor:
    """A detached copy of ``value`` with its size, stride and storage offset, sharing no memory
    with it: compiled code assumes the layout it was compiled for (Inductor pads strides, a
    backward graph receives slices of saved activations), which ``clone`` makes contiguous where
    the tensor is not dense. Its negative and conjugate bits are kept (:mod:`views`): the copy of
    its memory is viewed as it is."""
    value = value.detach()
    if value.layout != torch.strided or type(value) is not torch.Tensor or value.is_quantized:
        return value.clone()
    extent = (
        1
        + sum((size - 1) * stride for size, stride in zip(value.shape, value.stride(), strict=True))
        if value.numel()
        else 0
    )
    span = value.new_empty(0).set_(
        value.untyped_storage(), 0, (value.storage_offset() + extent,), (1,)
    )
    copy = value.new_empty(0).set_(
        span.clone().untyped_storage(), value.storage_offset(), value.shape, value.stride()
    )
    return viewed(copy, value.is_neg(), value.is_conj())


def traced_layout(gm: torch.fx.GraphModule, inputs: Sequence[Any]) -> list[Any] | None:
    """Copies of ``inputs`` laid out as ``gm``'s placeholders were traced, where a call's layout
    differs; None where none does (or the graph keeps no traced values). A backward graph is
    handed the activations its forward saved as Inductor laid them out (channels-last where it
    lays convolutions out so), while its ops were traced on eager's layout: a ``view`` traced
    there may not run eagerly on Inductor's. Only concrete sizes and strides are laid out."""
    traced = [node.meta.get("val") for node in gm.graph.nodes if node.op == "placeholder"]
    if len(traced) != len(inputs):
        return None
    relaid = [_as_traced(value, fake) for value, fake in zip(inputs, traced, strict=True)]
    return relaid if any(new is not old for new, old in zip(relaid, inputs, strict=True)) else None


def _as_traced(value: Any, fake: Any) -> Any:
    """``value``, or a copy of it laid out as ``fake`` was traced where that layout differs and
    is concrete (:func:`traced_layout`)."""
    if not (
        isinstance(value, torch.Tensor)
        and isinstance(fake, torch.Tensor)
        and value.layout == torch.strided
        and fake.layout == torch.strided
    ):
        return value
    stride = tuple(fake.stride())
    if (
        not all(type(size) is int for size in (*fake.shape, *stride))
        or tuple(fake.shape) != tuple(value.shape)
        or stride == value.stride()
    ):
        return value
    copy = torch.empty_strided(value.shape, stride, dtype=value.dtype, device=value.device)
    return viewed(
        copy.copy_(unviewed(value.detach())), value.is_neg(), value.is_conj()
    ).requires_grad_(value.requires_grad)


def widened(value: Any) -> Any:
    """``value`` for an fp64 run: a floating tensor in fp64 (keeping ``requires_grad``), a complex
    one in complex128, any other tensor a detached copy; anything else as it is."""
    if not isinstance(value, torch.Tensor):
        return value
    if value.is_floating_point():
        return value.detach().to(torch.float64).requires_grad_(value.requires_grad)
    if value.is_complex():
        return value.detach().to(torch.complex128)
    return value.detach().clone()


def widened_copy(value: Any, keep_grad: bool) -> Any:
    """``value`` widened (:func:`widened`) as :func:`run_graph` copies an input: a tensor in fp64
    or complex128 already, which widening leaves in its own storage, is copied."""
    wide = widened(value)
    if not isinstance(wide, torch.Tensor):
        return wide
    if wide.dtype == value.dtype and (wide.is_floating_point() or wide.is_complex()):
        return clone_values([wide], keep_grad)[0]
    return wide.requires_grad_(keep_grad and wide.requires_grad)
