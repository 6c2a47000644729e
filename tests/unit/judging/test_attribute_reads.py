"""A torch-level graph that reads ``.data`` holds a call of a C function that Dynamo cannot trace
again: the graph the plugin keeps spells it as the attribute, so that it compiles again, in
process and in a repro (torchao's fp8 convolution tests read their weights' ``.data``)."""

from __future__ import annotations

from typing import Any

import torch

from pytest_torchcompile.judging.capture import plain_graph
from pytest_torchcompile.torch_internals.compiling import reset


def relu_of_data(x: torch.Tensor) -> torch.Tensor:
    return torch.relu(x.data) * 2


def dynamo_graph(fn: Any, x: torch.Tensor) -> torch.fx.GraphModule:
    graphs: list[torch.fx.GraphModule] = []

    def keep(gm: torch.fx.GraphModule, inputs: Any) -> Any:
        graphs.append(gm)
        return gm.forward

    reset()
    try:
        torch.compile(fn, backend=keep, fullgraph=True)(x)
    finally:
        reset()
    (gm,) = graphs
    return gm


def test_a_data_read_is_kept_as_the_attribute_and_compiles_again() -> None:
    x = torch.randn(16, requires_grad=True)
    captured = dynamo_graph(relu_of_data, x)
    assert torch._C._autograd._get_data_attr in [node.target for node in captured.graph.nodes]

    graph, constants = plain_graph(captured)
    kept = torch.fx.GraphModule(constants, graph)

    assert next(
        (node.target, node.args[1:]) for node in kept.graph.nodes if node.op == "call_function"
    ) == (getattr, ("data",))
    assert torch.equal(torch.fx.symbolic_trace(kept)(x)[0], relu_of_data(x))
    reset()
    try:
        assert torch.equal(torch.compile(kept, fullgraph=True)(x)[0], relu_of_data(x))
    finally:
        reset()
