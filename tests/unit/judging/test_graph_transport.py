"""A graph sent to a judging child arrives as the graph it was: ops that take no input (factories,
ops on constants) stay ops, and are compiled and judged there, instead of becoming the constant
their eager result is."""

from __future__ import annotations

import io

import torch
import torch.fx

from pytest_torchcompile.common.kinds import FailureKind
from pytest_torchcompile.judging.isolation.parent import IsolatedJudge
from pytest_torchcompile.judging.isolation.protocol import JudgeSettings, encode_candidate

aten = torch.ops.aten
RELU_BUG = "torch._inductor.config.cpp.inject_relu_bug_TESTING_ONLY = 'accuracy'"


def from_constants_only() -> torch.fx.GraphModule:
    """``relu(iota(8) * c - 3.5)``, ``c`` a constant tensor: a graph whose inputs play no part."""
    graph = torch.fx.Graph()
    graph.placeholder("unused")
    iota = graph.call_function(
        torch.ops.prims.iota.default,
        (8,),
        {
            "start": 0,
            "step": 1,
            "dtype": torch.int64,
            "device": torch.device("cpu"),
            "requires_grad": False,
        },
    )
    scale = graph.get_attr("scale")
    shifted = graph.call_function(
        aten.sub.Tensor, (graph.call_function(aten.mul.Tensor, (iota, scale)), 3.5)
    )
    graph.output((graph.call_function(aten.relu.default, (shifted,)),))
    return torch.fx.GraphModule({"scale": torch.tensor([0.5])}, graph)


def with_nested_graph() -> torch.fx.GraphModule:
    """A graph calling a higher-order op on a graph module it holds, an op packet among its ops."""
    body = torch.fx.Graph()
    x = body.placeholder("x")
    body.output((body.call_function(aten.cos.default, (x,)),))
    graph = torch.fx.Graph()
    x = graph.placeholder("x")
    branch = graph.get_attr("branch")
    mapped = graph.call_function(torch.ops.higher_order.map_impl, (branch, [x], []))
    graph.output((graph.call_function(aten.sin, (mapped,)),))
    return torch.fx.GraphModule({"branch": torch.fx.GraphModule({}, body)}, graph)


def torch_level_pooling() -> torch.fx.GraphModule:
    """A torch-level graph calling a function torch.nn.functional makes with a factory
    (``boolean_dispatch``), with torch's enums among its arguments."""
    graph = torch.fx.Graph()
    x = graph.placeholder("x")
    pooled = graph.call_function(torch.nn.functional.adaptive_max_pool3d, (x, 2))
    laid_out = graph.call_function(
        aten.clone.default, (pooled,), {"memory_format": torch.channels_last_3d}
    )
    empty = graph.call_function(
        aten.empty.memory_format,
        ([2],),
        {"dtype": torch.float16, "layout": torch.strided, "device": torch.device("cpu")},
    )
    graph.output((laid_out, empty))
    return torch.fx.GraphModule({}, graph)


def arrived(gm: torch.fx.GraphModule) -> torch.fx.GraphModule:
    """``gm`` as a judging child loads it."""
    _, payload = encode_candidate(gm, [])
    loaded, _ = torch.load(io.BytesIO(payload), weights_only=False)
    assert isinstance(loaded, torch.fx.GraphModule)
    return loaded


def test_ops_that_take_no_input_arrive_as_ops() -> None:
    gm = from_constants_only()
    loaded = arrived(gm)
    assert loaded.code == gm.code
    assert torch.equal(loaded.scale, gm.scale)
    assert torch.equal(loaded(torch.zeros(1))[0], gm(torch.zeros(1))[0])


def test_nested_graphs_and_op_packets_arrive_as_they_were() -> None:
    gm = with_nested_graph()
    loaded = arrived(gm)
    assert loaded.code == gm.code
    assert loaded.branch.code == gm.branch.code
    assert [node.target for node in loaded.graph.nodes] == [node.target for node in gm.graph.nodes]


def test_functions_made_by_a_factory_and_torch_enums_arrive_as_they_were() -> None:
    gm = torch_level_pooling()
    loaded = arrived(gm)
    assert loaded.code == gm.code
    assert [(node.target, node.kwargs) for node in loaded.graph.nodes] == [
        (node.target, node.kwargs) for node in gm.graph.nodes
    ]


def test_a_child_judges_the_ops_of_a_graph_of_constants() -> None:
    # Were the graph traced again from its code there, the child would compile one constant,
    # which the injected relu bug cannot touch, and the failure would not be confirmed.
    with IsolatedJudge(RELU_BUG) as judge:
        verdict = judge(from_constants_only(), [torch.zeros(1)], JudgeSettings())
    assert verdict.failure == FailureKind.ACCURACY
