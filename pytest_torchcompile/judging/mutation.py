"""What a graph writes into: the nodes that may write an argument, the inputs an eager run
changes (results, judged as outputs are).

Embedded in every full repro file with ``judge.py``: torch and the standard library only.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

from pytest_torchcompile.judging.copies import clone_values
from pytest_torchcompile.judging.seeding import seeded_alike

IN_PLACE_OPERATORS = frozenset(
    {
        "setitem",
        "delitem",
        "iadd",
        "iand",
        "iconcat",
        "ifloordiv",
        "ilshift",
        "imatmul",
        "imod",
        "imul",
        "ior",
        "ipow",
        "irshift",
        "isub",
        "itruediv",
        "ixor",
    }
)
"""The functions of ``operator`` that write into their first argument."""


def operator_name(target: Any) -> str | None:
    """The name of ``target`` in ``operator`` (``setitem``, ``iadd``...), or None for anything
    else: fx records ``operator``'s functions under their C module, ``_operator``."""
    if getattr(target, "__module__", None) != "_operator":
        return None
    return getattr(target, "__name__", None)


def may_write(module: Callable[..., Any]) -> bool:
    """Whether a call of ``module`` may write into its arguments: anything but a graph module
    whose graph calls nothing that writes one (:func:`may_write_inputs`) may."""
    return not isinstance(module, torch.fx.GraphModule) or may_write_inputs(module)


def may_write_inputs(gm: Any) -> bool:
    """Whether a graph calls anything that may write into an argument (:func:`writes_an_argument`)."""
    return any(writes_an_argument(node) for node in gm.graph.nodes)


def writes_an_argument(node: torch.fx.Node) -> bool:
    """Whether a node may write into an argument: an op whose schema writes one, an in-place
    operator, a method or submodule, or a function with no schema to tell (a torch-level
    graph's)."""
    if node.op in ("call_method", "call_module"):
        return True
    if node.op != "call_function":
        return False
    name = operator_name(node.target)
    if name is not None:
        return name in IN_PLACE_OPERATORS
    schema = getattr(node.target, "_schema", None)
    return schema is None or any(
        argument.alias_info is not None and argument.alias_info.is_write
        for argument in schema.arguments
    )


def mutated_inputs(module: Any, inputs: Sequence[Any]) -> list[int]:
    """The positions of the tensor inputs that an eager run of ``module`` (a graph) writes into: what
    a graph writes into its inputs is a result, judged as its outputs are. An eager run finds them
    only where the graph may write into an argument (:func:`may_write_inputs`)."""
    if not may_write_inputs(module):
        return []
    args = clone_values(inputs)
    with torch.no_grad(), seeded_alike(module):
        module(*args)
    return [
        index
        for index, (before, after) in enumerate(zip(inputs, args, strict=True))
        if isinstance(before, torch.Tensor)
        and isinstance(after, torch.Tensor)
        and changed(before, after)
    ]


def changed(before: torch.Tensor, after: torch.Tensor) -> bool:
    """Whether a call changed a tensor in place: its shape, or any element (a NaN that stayed a NaN
    is no change, which ``torch.equal`` would call one)."""
    before, after = before.detach(), after.detach()
    if before.shape != after.shape or before.dtype != after.dtype:
        return True
    if torch.equal(before, after):
        return False
    if not (before.is_floating_point() or before.is_complex()):
        return True
    return not bool(((before == after) | (before.isnan() & after.isnan())).all())
