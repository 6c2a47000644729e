"""Memory no op wrote: filling what ``empty`` and its kin allocate, so that two runs filled unlike
show which results depend on it.

Imports the standard library and torch only: every full repro file embeds this module whole."""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator
from typing import Any

import torch
from torch._ops import HigherOrderOperator
from torch.utils._python_dispatch import TorchDispatchMode


@contextlib.contextmanager
def filling_unwritten(fill: float, allocated: list[int]) -> Iterator[None]:
    """Fill the memory that ``empty``, ``empty_like``, ``empty_strided``, ``new_empty`` and the
    like allocate with ``fill`` (cast to each tensor's dtype), instead of leaving whatever the
    allocator gives, and list in ``allocated`` the size of each tensor so filled. Two runs filled unlike show
    which results depend on memory no op wrote: those are not values.

    Works at the aten level (a dispatch mode), so it covers eager models and graphs alike. A
    higher-order op (``torch.cond``, ``while_loop``, ...) runs with the mode off inside it: what
    its body allocates is left as the allocator gives it."""
    aten = torch.ops.aten
    allocating = {
        aten.empty,
        aten.empty_like,
        aten.empty_strided,
        aten.new_empty,
        aten.new_empty_strided,
        aten.empty_permuted,
    }
    whole = 0 if math.isnan(fill) else int(fill)

    def writes_out(func: Any) -> bool:
        # An out= overload writes into memory the caller gave: told by its schema (torch.Tag.out is
        # newer than 2.11), or by its name where the schema does not tell (out_arguments_missing).
        arguments = getattr(getattr(func, "_schema", None), "arguments", None)
        if arguments is None or not all(hasattr(argument, "is_out") for argument in arguments):
            return "out" in getattr(func, "_overloadname", "out")
        return any(argument.is_out for argument in arguments)

    class FillingMode(TorchDispatchMode):
        supports_higher_order_operators = True

        def __torch_dispatch__(
            self, func: Any, types: Any, args: Any = (), kwargs: Any = None
        ) -> Any:
            result = func(*args, **(kwargs or {}))
            if isinstance(func, HigherOrderOperator):
                return result
            if (
                func.overloadpacket in allocating
                and not writes_out(func)
                and isinstance(result, torch.Tensor)
                and result.numel()
            ):
                result.fill_(_fill_of(result, fill, whole))
                allocated.append(result.numel())
            return result

    with FillingMode():
        yield


def _fill_of(result: torch.Tensor, fill: float, whole: int) -> float | int | bool:
    """What fills ``result``: ``fill`` where its dtype holds it, else its whole part (``whole``)."""
    if result.is_floating_point() or result.is_complex():
        return fill
    return bool(whole) if result.dtype == torch.bool else whole
