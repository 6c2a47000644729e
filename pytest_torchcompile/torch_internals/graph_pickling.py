"""FX graph modules pickled as their graph, node by node, instead of as their code.

``GraphModule`` pickles its generated code, and unpickling traces that code again with a plain
``torch.fx.Tracer``: a call that takes no traced value (a factory such as ``prims.iota``, an op
on constants only) runs once during that trace and becomes a constant tensor, and item
assignment cannot be traced at all. A graph sent to another process to be compiled and judged
must arrive as the graph it was, or that process compiles other code than the one found failing:
``arange(11) * tensor([10**9])`` arrives as one constant, which no compiler gets wrong.

The module is a ``pickle_module`` for ``torch.save``: ``torch.save(value, file,
pickle_module=graph_pickling)``.
"""

from __future__ import annotations

import importlib
import pickle
import sys
import types
from dataclasses import dataclass
from typing import Any

import torch
import torch.fx

from pytest_torchcompile.torch_internals.graph_compile import visible_outputs, with_visible_outputs


@dataclass(frozen=True)
class _NodeName:
    """A node an argument refers to, by its name in the graph being pickled."""

    name: str


def _by_name(node: torch.fx.Node) -> Any:
    return _NodeName(node.name)


def _graph_module(
    class_name: str,
    attributes: dict[str, Any],
    codegen: Any,
    nodes: list[tuple[str, str, Any, Any, Any, Any]],
    visible: list[int] | None = None,
) -> torch.fx.GraphModule:
    """Unpickle: the graph built from its nodes (op, name, target, args, kwargs, type) in order,
    its outputs marked ``visible`` as they were (:func:`graph_compile.visible_outputs`)."""
    graph = torch.fx.Graph()
    graph.set_codegen(codegen)
    built: dict[str, torch.fx.Node] = {}

    def resolve(value: Any) -> Any:
        return built[value.name] if isinstance(value, _NodeName) else value

    for op, name, target, args, kwargs, type_expr in nodes:
        built[name] = graph.create_node(
            op,
            target,
            torch.fx.node.map_aggregate(args, resolve),
            torch.fx.node.map_aggregate(kwargs, resolve),
            name,
            type_expr,
        )
    return with_visible_outputs(torch.fx.GraphModule(attributes, graph, class_name), visible)


def _op_overload(namespace: str, name: str, overload: str) -> Any:
    return getattr(getattr(getattr(torch.ops, namespace), name), overload)


def _op_packet(namespace: str, name: str) -> Any:
    return getattr(getattr(torch.ops, namespace), name)


def _higher_order_op(name: str) -> Any:
    return getattr(torch.ops.higher_order, name)


def _module_attribute(module: str, name: str) -> Any:
    return getattr(importlib.import_module(module), name)


def _reduced_graph_module(gm: torch.fx.GraphModule) -> tuple[Any, ...]:
    nodes = [
        (
            node.op,
            node.name,
            node.target,
            torch.fx.node.map_arg(node.args, _by_name),
            torch.fx.node.map_arg(node.kwargs, _by_name),
            node.type,
        )
        for node in gm.graph.nodes
    ]
    # What get_attr and call_module nodes name: constants, parameters, submodules (a nested
    # graph module is pickled by this same rule).
    targets = {
        str(node.target) for node in gm.graph.nodes if node.op in ("get_attr", "call_module")
    }
    attributes = {target: _attribute(gm, target) for target in sorted(targets)}
    return _graph_module, (
        type(gm).__name__,
        attributes,
        gm.graph._codegen,
        nodes,
        visible_outputs(gm),
    )


def _attribute(gm: torch.fx.GraphModule, target: str) -> Any:
    value: Any = gm
    for part in target.split("."):
        value = getattr(value, part)
    return value


class _GraphPickler(pickle.Pickler):
    """A pickler that writes graph modules as their nodes, and what their nodes name by the name
    their code would use: ops (an op overload holds objects no pickler can write), torch's dtypes,
    layouts and memory formats, functions published under another name than their own."""

    def reducer_override(self, obj: Any) -> Any:
        if isinstance(obj, torch.fx.GraphModule):
            return _reduced_graph_module(obj)
        if isinstance(obj, torch._ops.OpOverload):
            return _op_overload, (
                obj.namespace,
                obj._schema.name.split("::", 1)[1],
                obj._overloadname,
            )
        if isinstance(obj, torch._ops.OpOverloadPacket):
            namespace, name = obj._qualified_op_name.split("::", 1)
            return _op_packet, (namespace, name)
        if isinstance(obj, torch._ops.HigherOrderOperator):
            return _higher_order_op, (obj.name(),)
        if isinstance(obj, torch.dtype | torch.layout | torch.memory_format):
            # Pickled by default as a dotted name looked up in whichever loaded module holds it first.
            return _module_attribute, ("torch", str(obj).removeprefix("torch."))
        if isinstance(obj, types.FunctionType) and _published_apart(obj):
            return _module_attribute, (obj.__module__, obj.__name__)
        return NotImplemented


def _published_apart(function: types.FunctionType) -> bool:
    """Whether a function made by a factory is published under its name in its module (torch.nn.
    functional's boolean_dispatch functions, adaptive_max_pool3d among them), as a graph's code
    names it: pickled by its qualified name, it could not be found."""
    module = sys.modules.get(function.__module__)
    return (
        "<locals>" in function.__qualname__ and getattr(module, function.__name__, None) is function
    )


Pickler = _GraphPickler
"""What makes this module a ``pickle_module`` for ``torch.save`` that keeps graph modules as they
are; what it writes ``torch.load`` reads back as usual, where this module can be imported."""
