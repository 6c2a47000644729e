"""The graph of the file's ``Repro`` module, traced with the ops plain tracing loses."""

import operator
from collections.abc import Callable
from typing import Any

import torch
import torch.fx
from torch.overrides import TorchFunctionMode

from pytest_torchcompile.judging.mutation import IN_PLACE_OPERATORS


class _Proxy(torch.fx.Proxy):
    """A traced value that records item assignment (``x[i] = v``) and in-place operators
    (``x += v``), as a torch-level graph writes its setitem and iadd nodes, as nodes of the same
    ops: plain tracing refuses the first and turns the second into an out-of-place op, which
    loses a write through a view."""

    def __setitem__(self, key: Any, value: Any) -> None:
        self.tracer.create_proxy("call_function", operator.setitem, (self, key, value), {})


def _in_place(op: Callable[[Any, Any], Any]) -> Callable[[torch.fx.Proxy, Any], torch.fx.Proxy]:
    return lambda self, other: self.tracer.create_proxy("call_function", op, (self, other), {})


class _Factories(TorchFunctionMode):
    """Records the calls that make a tensor from no traced value (``torch.zeros(4)``,
    ``aten.empty.memory_format(...)``) as nodes: plain tracing runs them once and keeps their
    result as a constant, so the compiler would never see the op."""

    def __init__(self, tracer: torch.fx.Tracer) -> None:
        super().__init__()
        self.tracer = tracer

    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        result = func(*args, **kwargs)
        if _holds_proxy((args, kwargs)) or not isinstance(result, torch.Tensor):
            return result
        return self.tracer.create_proxy("call_function", func, args, kwargs)


def _holds_proxy(value: Any) -> bool:
    if isinstance(value, list | tuple):
        return any(_holds_proxy(item) for item in value)
    if isinstance(value, dict):
        return any(_holds_proxy(item) for item in value.values())
    return isinstance(value, torch.fx.Proxy)


def _trace(module: torch.nn.Module) -> torch.fx.GraphModule:
    """The module's graph, ops on constants and factory ops included (plain symbolic_trace runs
    those and keeps their results as constants)."""

    class Tracer(torch.fx.Tracer):
        # Defined here: a graph module keeps the class of a tracer defined at module level, so it
        # would pickle by reference to this file, which another process does not import.
        proxy_buffer_attributes = True

        def proxy(self, node: torch.fx.Node) -> torch.fx.Proxy:
            return _Proxy(node, self)

    # Set here, not where the class is: the judging code that names the operators comes later in
    # the file.
    for name in IN_PLACE_OPERATORS - {"setitem", "delitem"}:
        setattr(_Proxy, f"__{name}__", _in_place(getattr(operator, name)))
    tracer = Tracer()
    with _Factories(tracer):
        graph = tracer.trace(module)
    for node in graph.nodes:
        if isinstance(
            node.type, str
        ):  # an annotation this file's postponed evaluation left a string
            node.type = None
    return torch.fx.GraphModule(module, graph)
