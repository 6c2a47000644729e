"""Values as Dynamo and pytree see them: nested containers, symbolic sizes."""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import torch
import torch.fx


def tree_map(fn: Callable[[Any], Any], tree: Any) -> Any:
    """``tree`` with each leaf replaced by ``fn(leaf)``, through the containers pytree knows
    (lists, tuples, named tuples, dicts)."""
    import torch.utils._pytree as pytree

    return pytree.tree_map(fn, tree)


def symbolic_sizes(example_inputs: Sequence[Any]) -> list[list[str] | None]:
    """For each example input, its sizes as strings (symbols such as ``s0`` stay symbolic)."""
    sizes: list[list[str] | None] = []
    for value in example_inputs:
        if isinstance(value, torch.Tensor):
            sizes.append([str(s) for s in value.shape])
        else:
            sizes.append(None)
    return sizes


def concrete_int(value: Any) -> int:
    """An int, or a symbolic int's hint (the size it had when traced)."""
    if isinstance(value, torch.SymInt):
        hint = getattr(getattr(value, "node", None), "hint", None)  # None too where torch keeps no hint
        return int(hint) if hint is not None else 1
    return int(value)


@contextlib.contextmanager
def filling_unwritten(fill: float, allocated: list[int]) -> Iterator[None]:
    """Fill the memory that ``empty``, ``empty_like``, ``empty_strided``, ``new_empty`` and the
    like allocate with ``fill`` (cast to each tensor's dtype), instead of leaving whatever the
    allocator gives, and list in ``allocated`` the size of each tensor so filled. Two runs filled unlike show
    which results depend on memory no op wrote: those are not values.

    Works at the aten level (a dispatch mode), so it covers eager models and graphs alike."""
    from torch.utils._python_dispatch import TorchDispatchMode

    aten = torch.ops.aten
    allocating = {aten.empty, aten.empty_like, aten.empty_strided, aten.new_empty, aten.new_empty_strided,
                  aten.empty_permuted}
    whole = 0 if math.isnan(fill) else int(fill)

    def writes_out(func: Any) -> bool:
        # An out= overload writes into memory the caller gave: told by its schema (torch.Tag.out is
        # newer than 2.11), or by its name where the schema does not tell (out_arguments_missing).
        arguments = getattr(getattr(func, "_schema", None), "arguments", None)
        if arguments is None or not all(hasattr(argument, "is_out") for argument in arguments):
            return "out" in getattr(func, "_overloadname", "out")
        return any(argument.is_out for argument in arguments)

    class FillingMode(TorchDispatchMode):
        def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            result = func(*args, **(kwargs or {}))
            if func.overloadpacket in allocating and not writes_out(func) \
                    and isinstance(result, torch.Tensor) and result.numel():
                exact = result.is_floating_point() or result.is_complex()
                result.fill_(fill if exact else bool(whole) if result.dtype == torch.bool else whole)
                allocated.append(result.numel())
            return result

    with FillingMode():
        yield


def symbolic_hint_missing() -> str | None:
    """What tells the size a symbolic int had when traced, where this torch lacks it."""
    from torch.fx.experimental.sym_node import SymNode

    return None if hasattr(SymNode, "hint") else "torch.fx.experimental.sym_node.SymNode.hint"


def out_arguments_missing() -> str | None:
    """What tells an out= overload by its schema, where this torch lacks it."""
    schema = getattr(torch.ops.aten.empty.out, "_schema", None)
    if schema is None or not all(hasattr(argument, "is_out") for argument in schema.arguments):
        return "an op schema's Argument.is_out"
    return None
