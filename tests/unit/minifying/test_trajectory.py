"""What the minifier records for a report to draw: the deviation along the graph (each
intermediate's ratio to eager's error, in graph order, with where the deviation starts) and its
trajectory (the ops left after every candidate)."""

from __future__ import annotations

import dataclasses
import itertools
import json
from typing import Any

import torch
import torch.fx
from torch.fx.experimental.proxy_tensor import make_fx

from pytest_torchcompile.common.kinds import FailureKind
from pytest_torchcompile.common.leaves import LeafResult
from pytest_torchcompile.common.results import CaseResult, Deviation, MinifyResult
from pytest_torchcompile.common.verdict import Status
from pytest_torchcompile.judging.case import ReproCase
from pytest_torchcompile.judging.judge import GraphVerdict
from pytest_torchcompile.minifying.search import minify_graph

aten = torch.ops.aten


def sin_relu_cos(x: torch.Tensor) -> tuple[torch.Tensor]:
    return (torch.cos(torch.cos(torch.relu(torch.sin(torch.sin(x))))),)


def relu_is_wrong(gm: torch.fx.GraphModule, inputs: list[Any]) -> GraphVerdict:
    """A fake judge: every value computed from a relu deviates, ten times eager's error at the
    relu, halved by each op after it (as a saturating op would mask it)."""
    gm(*inputs)
    ratios: dict[torch.fx.Node, float] = {}
    for node in gm.graph.nodes:
        feeding = [ratios[arg] for arg in node.all_input_nodes if arg in ratios]
        if node.op == "call_function" and node.target is aten.relu.default:
            ratios[node] = 10.0
        elif feeding:
            ratios[node] = max(feeding) / 2
    (returned,) = [node.args[0] for node in gm.graph.nodes if node.op == "output"]
    leaves = [
        LeafResult(
            f"graph_out[{index}]",
            (8,),
            "float32",
            ratios.get(value, 1.0) <= 2.0,
            "fp64 rmse",
            ratios.get(value, 1.0),
            1.0,
        )
        for index, value in enumerate(returned)
    ]
    failing = not all(leaf.passed for leaf in leaves)
    return GraphVerdict(FailureKind.ACCURACY if failing else None, leaves)


def test_the_locate_run_is_recorded_in_graph_order_with_where_it_starts() -> None:
    inputs = [torch.randn(8)]
    case = ReproCase(make_fx(sin_relu_cos)(*inputs), inputs, FailureKind.ACCURACY, "t")
    reduction = minify_graph(case, relu_is_wrong)

    assert [(point.op, point.ratio, point.passed) for point in reduction.deviation] == [
        ("aten.sin", 1.0, True),
        ("aten.sin", 1.0, True),
        ("aten.relu", 10.0, False),
        ("aten.cos", 5.0, False),
        ("aten.cos", 2.5, False),
    ]
    assert [point.starts for point in reduction.deviation] == [False, False, True, False, False]
    steps = reduction.trajectory
    assert [step.compiles for step in steps] == list(range(1, reduction.compiles + 1))
    assert (steps[0].ops_left, steps[-1].ops_left) == (5, 1)
    assert all(a.seconds <= b.seconds for a, b in itertools.pairwise(steps))


def test_they_travel_through_the_json_report_and_back() -> None:
    minify = MinifyResult(
        5,
        1,
        1.0,
        3,
        "minimal",  # type: ignore[arg-type]
        deviation=[Deviation("relu", "aten.relu", float("inf"), False, True)],
    )
    result = CaseResult("t.py::a", Status.FAIL_ACCURACY, minify=minify)
    # As the JSON report spells a non-finite ratio.
    data = json.loads(json.dumps(result.to_dict()).replace("Infinity", '"inf"'))
    back = CaseResult.from_dict(data)
    assert back.minify is not None
    assert back.minify.deviation == minify.deviation
    assert dataclasses.asdict(back) == dataclasses.asdict(result)


def scaled_index(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    steps = torch.arange(8, dtype=torch.int64) * 3 + x
    return steps - 1, torch.sin(x.float()).to(torch.int64)


def mul_is_wrong_exactly(gm: torch.fx.GraphModule, inputs: list[Any]) -> GraphVerdict:
    """A fake judge: every value computed from the mul differs from its fp64 value, which an
    exact comparison gives no ratio."""
    gm(*inputs)
    wrong: set[torch.fx.Node] = set()
    for node in gm.graph.nodes:
        if node.target is aten.mul.Tensor or any(arg in wrong for arg in node.all_input_nodes):
            wrong.add(node)
    (returned,) = [node.args[0] for node in gm.graph.nodes if node.op == "output"]
    leaves = [
        LeafResult(f"graph_out[{index}]", (8,), "int64", value not in wrong, "exact")
        for index, value in enumerate(returned)
    ]
    failing = not all(leaf.passed for leaf in leaves)
    return GraphVerdict(FailureKind.ACCURACY if failing else None, leaves)


def test_an_integer_deviation_is_located_where_it_starts() -> None:
    inputs = [torch.arange(8, dtype=torch.int64)]
    case = ReproCase(make_fx(scaled_index)(*inputs), inputs, FailureKind.ACCURACY, "t")
    reduction = minify_graph(case, mul_is_wrong_exactly)

    points = [
        (point.value, point.ratio, point.passed, point.starts) for point in reduction.deviation
    ]
    # The integer converted from a floating value is left out: rounding within the rule upstream
    # could flip it.
    assert points == [
        ("arange", None, True, False),
        ("mul", float("inf"), False, True),
        ("add", float("inf"), False, False),
        ("sub", float("inf"), False, False),
        ("_to_copy", None, True, False),
        ("sin", None, True, False),
    ]


def fails_only_fused(gm: torch.fx.GraphModule, inputs: list[Any]) -> GraphVerdict:
    """A fake judge of a deviation that arises only inside one fused kernel: a graph returning
    its intermediates, which splits the kernel, passes."""
    gm(*inputs)
    (returned,) = [node.args[0] for node in gm.graph.nodes if node.op == "output"]
    computed = [node for node in gm.graph.nodes if node.op == "call_function"]
    fused = len(returned) == 1 and len(computed) == 5
    leaves = [
        LeafResult(f"graph_out[{index}]", (8,), "float32", not fused, "fp64 rmse", 1.0, 1.0)
        for index in range(len(returned))
    ]
    return GraphVerdict(FailureKind.ACCURACY if fused else None, leaves)


def test_a_deviation_inside_a_fused_kernel_is_recorded_as_passing_once_split() -> None:
    inputs = [torch.randn(8)]
    case = ReproCase(make_fx(sin_relu_cos)(*inputs), inputs, FailureKind.ACCURACY, "t")
    reduction = minify_graph(case, fails_only_fused)

    assert len(reduction.deviation) == 5
    assert all(point.passed and not point.starts for point in reduction.deviation)
