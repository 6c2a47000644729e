"""Values as Dynamo and pytree see them: nested containers, symbolic sizes."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
import torch.fx
import torch.utils._pytree as pytree
from torch.fx.experimental.sym_node import SymNode


def tree_map(fn: Callable[[Any], Any], tree: Any) -> Any:
    """``tree`` with each leaf replaced by ``fn(leaf)``, through the containers pytree knows
    (lists, tuples, named tuples, dicts)."""
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
        hint = getattr(
            getattr(value, "node", None), "hint", None
        )  # None too where torch keeps no hint
        return int(hint) if hint is not None else 1
    return int(value)


def nested_int(value: Any) -> bool:
    """Whether ``value`` is a jagged size of a nested tensor, or a symbol that stands for one:
    it has no int value."""
    if not isinstance(value, torch.SymInt):
        return False
    hint = getattr(value.node, "hint", None)
    return value.node.is_nested_int() or (
        isinstance(hint, torch.SymInt) and hint.node.is_nested_int()
    )


def symbolic_hint_missing() -> str | None:
    """What tells the size a symbolic int had when traced, where this torch lacks it."""
    return None if hasattr(SymNode, "hint") else "torch.fx.experimental.sym_node.SymNode.hint"


def out_arguments_missing() -> str | None:
    """What tells an out= overload by its schema, where this torch lacks it."""
    schema = getattr(torch.ops.aten.empty.out, "_schema", None)
    if schema is None or not all(hasattr(argument, "is_out") for argument in schema.arguments):
        return "an op schema's Argument.is_out"
    return None
