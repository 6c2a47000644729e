"""Which graphs a failing check blames: the recorded calls of compiled graphs that fail on
their own, the torch-level graphs that do, and the intermediate a later op masks."""

from __future__ import annotations

import math
from typing import Any

import torch

from pytest_torchcompile.checking.masked import (
    ConcurrentProbes,
    MaskedDeviation,
    find_masked_deviation,
)
from pytest_torchcompile.checking.outcome import FailingGraph
from pytest_torchcompile.common.kinds import FailureKind
from pytest_torchcompile.common.settings import CheckOptions
from pytest_torchcompile.common.verdict import Comparison
from pytest_torchcompile.judging.capture import CapturedGraph, DynamoGraph
from pytest_torchcompile.judging.copies import clone_values
from pytest_torchcompile.judging.isolation.process_setup import config_patches
from pytest_torchcompile.judging.judge import DYNAMO, compare_graph_outputs, judge_graph
from pytest_torchcompile.judging.mutation import mutated_inputs
from pytest_torchcompile.judging.references import reference_outputs, unwritten_elements
from pytest_torchcompile.torch_internals.config import inductor_config
from pytest_torchcompile.torch_internals.random_ops import generator_state_outputs


def _judged_call(graph: CapturedGraph, inputs: list[Any], options: CheckOptions) -> Comparison:
    """One recorded call of a compiled graph judged (its outputs and the inputs it writes into)."""
    mutated = mutated_inputs(graph.gm, inputs)
    eager, fp64 = reference_outputs(graph.gm, inputs, mutated=mutated)
    args = clone_values(inputs)
    with torch.no_grad():
        outputs = (
            [*graph.compiled(list(args)), *(args[index] for index in mutated)]
            if graph.compiled is not None
            else []
        )
    leaves = compare_graph_outputs(
        outputs,
        eager,
        fp64,
        options.tolerance,
        not options.ignore_non_float,
        unjudged=unwritten_elements(graph.gm, inputs, mutated=mutated),
        mutated=mutated,
        not_values=generator_state_outputs(graph.gm),
    )
    return Comparison(leaves)


def failing_graphs(
    graphs: list[CapturedGraph], dynamo_graphs: list[DynamoGraph], options: CheckOptions
) -> list[FailingGraph]:
    """The recorded graph calls that fail on their own, worst first. When no post-AOT graph does,
    the torch-level graphs whose calls fail compiled through the whole stack (the bug was in the
    graph Inductor received: a decomposition); else every graph's last call (the deviation then
    builds up across graph breaks)."""
    scored = [
        found
        for graph in graphs
        if graph.compiled is not None and not graph.has_random_ops
        if (found := _first_failing_call(graph, options)) is not None
    ]
    if not scored:
        return _failing_dynamo_graphs(dynamo_graphs, options) or [
            FailingGraph(
                g,
                g.calls[-1],
                note="no graph deviates alone: the error builds up across graph breaks",
            )
            for g in graphs
            if g.calls
        ]
    return [failing for _, failing in sorted(scored, key=lambda item: -item[0])]


def _first_failing_call(
    graph: CapturedGraph, options: CheckOptions
) -> tuple[float, FailingGraph] | None:
    """A graph's first recorded call that fails on its own, with its worst error ratio."""
    for inputs in graph.calls:
        judged = _judged_call(graph, inputs, options)
        if not judged.passed:
            ratio = max(
                (leaf.ratio for leaf in judged.failing if leaf.ratio is not None),
                default=math.inf,
            )
            return ratio, FailingGraph(graph, inputs, non_float_only=judged.fails_only_in_non_float)
    return None


TORCH_LEVEL_NOTE = (
    "its post-AOT graph passes on its own: the deviation is already in the graph Inductor "
    "receives (a decomposition applied while AOT autograd traces), so this repro holds "
    "the torch-level graph and compiles it through the whole stack"
)


def _failing_dynamo_graphs(
    dynamo_graphs: list[DynamoGraph], options: CheckOptions
) -> list[FailingGraph]:
    """Torch-level graphs that fail on their own, judged as their repro will judge them (a
    compile through the whole stack, forward and backward in a training call), worst first."""
    scored: list[tuple[float, FailingGraph]] = []
    for graph in dynamo_graphs:
        if not graph.calls or not graph.judgeable():
            continue
        inputs = graph.calls[0]
        with (
            inductor_config(config_patches(graph.config_source)),
            torch.set_grad_enabled(options.training),
        ):
            verdict = judge_graph(
                graph.gm, inputs, options.tolerance, not options.ignore_non_float, level=DYNAMO
            )
        if verdict.failure == FailureKind.ACCURACY:
            scored.append(
                (
                    verdict.worst_ratio or math.inf,
                    FailingGraph(graph.lowered[0], inputs, note=TORCH_LEVEL_NOTE, dynamo=graph),
                )
            )
    return [failing for _, failing in sorted(scored, key=lambda item: -item[0])]


def masked_deviation(
    graphs: list[CapturedGraph],
    probes: ConcurrentProbes,
    options: CheckOptions,
) -> tuple[CapturedGraph, MaskedDeviation] | None:
    for graph in graphs:
        if graph.compiled is None or not graph.calls or graph.has_random_ops:
            continue
        deviation = find_masked_deviation(
            graph.gm, graph.calls[0], options.tolerance, probes.prepared.get(graph.index)
        )
        if deviation is not None:
            return graph, deviation
    return None
