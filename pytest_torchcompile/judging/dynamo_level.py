"""Whether a torch-level graph (Dynamo's) can be judged at its own level: it writes into none of
the tensors it holds, and a repro file can name each of its ops."""

from __future__ import annotations

from typing import Any

import torch
import torch.fx

from pytest_torchcompile.judging.mutation import IN_PLACE_OPERATORS


def writes_into_constants(gm: torch.fx.GraphModule) -> bool:
    """Whether a torch-level graph may write into a tensor it holds as an attribute: a compiled
    optimizer step holds the parameters it updates so (Dynamo's static addresses). Any value
    computed from such a tensor counts as a view of it."""
    held = {node for node in gm.graph.nodes if node.op == "get_attr"}
    for node in gm.graph.nodes:
        if node.op not in ("call_function", "call_method") or not held.intersection(
            node.all_input_nodes
        ):
            continue
        written = _nodes(node.kwargs.get("out"))
        if node.args and _writes_first_argument(node):
            written |= _nodes(node.args[0])
        if held & written:
            return True
        held.add(node)
    return False


def _nodes(argument: Any) -> set[torch.fx.Node]:
    """The nodes an argument names, itself or in a list or tuple (a foreach op's)."""
    found: list[torch.fx.Node] = []
    torch.fx.node.map_arg(argument, found.append)
    return set(found)


def _writes_first_argument(node: torch.fx.Node) -> bool:
    """Whether a torch-level call writes into its first argument: an in-place method or function
    (named with a trailing underscore, as torch names them: ``add_``, ``_foreach_add_``), an
    in-place operator or item assignment."""
    name = node.target if node.op == "call_method" else getattr(node.target, "__name__", "")
    if not isinstance(name, str):
        return False
    return (
        name in IN_PLACE_OPERATORS
        or name == "__setitem__"
        or (name.endswith("_") and not name.endswith("__"))
    )


def _nameable(target: Any) -> bool:
    module = getattr(target, "__module__", None) or ""
    return module.split(".")[0] in ("torch", "_operator", "operator", "builtins", "math")


def names_every_op(gm: torch.fx.GraphModule) -> bool:
    """Whether a repro file's code can name every op of ``gm``: no nn.Module calls, and every
    function a torch or builtin one."""
    return all(
        node.op != "call_module" and (node.op != "call_function" or _nameable(node.target))
        for node in gm.graph.nodes
    )
