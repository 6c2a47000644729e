"""Gradients at NaN values: filling the gradient a tensor gets where the tensor is NaN, so that two
runs filled unlike show which gradients depend on a NaN the forward computed.

Imports the standard library and torch only: every full repro file embeds this module whole."""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._pytree import tree_leaves


def nan_gradients_filled(
    call: Callable[..., Any], fill: float, filled: list[int]
) -> Callable[..., Any]:
    """``call`` with every tensor an op inside it reads, that requires grad and holds a NaN, given
    a gradient of ``fill`` at its NaN elements, as backward reaches it; ``filled`` lists the NaN
    count of each tensor so treated. Only the ops ``call`` runs are watched: a loss built from its
    results outside it (a NaN sum) leaves the gradients alone.

    A gradient through a NaN is no value: eager's own kernels give it by where the element falls
    (on the CPU, ``hardtanh``'s backward at a NaN gives 0 in the vectorized body of the kernel and
    the incoming gradient in its scalar tail). The elements where two runs filled unlike differ
    are those."""
    checked: dict[int, weakref.ReferenceType[torch.Tensor]] = {}

    def fill_at_nan(value: Any) -> None:
        if (
            not isinstance(value, torch.Tensor)
            or not value.requires_grad
            or not (value.is_floating_point() or value.is_complex())
        ):
            return
        seen = checked.get(id(value))
        if seen is not None and seen() is value:
            return
        checked[id(value)] = weakref.ref(value)
        nan = torch.isnan(value.detach())
        count = int(nan.sum())
        if count:
            value.register_hook(lambda grad: grad.masked_fill(nan, fill))
            filled.append(count)

    class NanGradientMode(TorchFunctionMode):
        def __torch_function__(
            self, func: Any, types: Any, args: Any = (), kwargs: Any = None
        ) -> Any:
            kwargs = kwargs or {}
            for value in tree_leaves((args, kwargs)):
                fill_at_nan(value)
            return func(*args, **kwargs)

    def watched(*args: Any, **kwargs: Any) -> Any:
        with NanGradientMode():
            return call(*args, **kwargs)

    return watched
