"""Check the graphs of plain ``torch.compile`` calls a test makes, without changing the test.

While a test runs, every graph Inductor compiles is captured; each call of a captured graph is
judged on its real inputs against the same graph run eagerly in its own dtype and in fp64. Graph
breaks are fine: each graph is judged on its own, and the report names it (index, code location).
The torch-level graph each compile starts from is judged too, once its post-AOT graphs pass: a
wrong decomposition is already in the graph Inductor receives, and shows only there.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.fx

from pytest_torchcompile.checking.masked import (
    ConcurrentProbes,
    ProbeChildren,
    find_masked_divergence,
)
from pytest_torchcompile.checking.model import FALLBACK_RANDOM_NOTE, TORCH_LEVEL_NOTE
from pytest_torchcompile.judging.capture import (
    CapturedGraph,
    DynamoGraph,
    GraphCapture,
    input_signature,
)
from pytest_torchcompile.judging.judge import (
    compare_graph_outputs,
    fp64_outputs,
    mutated_inputs,
    reference_outputs,
    rng_states,
    run_graph,
    set_rng_states,
    unwritten_elements,
)
from pytest_torchcompile.run.leaves import LeafResult
from pytest_torchcompile.run.verdict import Comparison, Status, out_of_memory
from pytest_torchcompile.torch_internals.interception import intercept_inductor
from pytest_torchcompile.torch_internals.rng import (
    EAGER_RNG_CONFIG,
    RandomDrawMismatch,
    recording_random_draws,
    replaying_random_draws,
)


@dataclass
class GraphFailure:
    graph: CapturedGraph
    inputs: list[Any]
    status: Status
    message: str
    leaves: list[LeafResult] = field(default_factory=list)
    gm: torch.fx.GraphModule | None = None
    note: str = ""
    fallback_random: bool = False
    dynamo: DynamoGraph | None = None


class GraphChecker:
    """Judges each (graph, input shapes) pair once; collects failures for the running test."""

    def __init__(self, tol: float, check_non_float: bool, intermediates: bool,
                 probe_children: ProbeChildren | None = None) -> None:
        self.tol = tol
        self.check_non_float = check_non_float
        self.intermediates = intermediates
        self.probes = ConcurrentProbes(probe_children)
        self.capture = GraphCapture(observer=self._observe, dynamo_observer=self._observe_torch_level,
                                    lowering_observer=self.probes.prepare if intermediates else None)
        self.failures: list[GraphFailure] = []
        self.unchecked: list[str] = []
        """What could not be judged (a graph, or a judged graph's intermediates), each
        ``"<graph label>: <reason>"``."""
        self.judged: dict[int, float | None] = {}
        """Every graph judged on its outputs, by index: its worst error ratio over its calls
        (None while all its outputs are within allclose)."""
        self._judged: set[tuple[int, tuple[Any, ...]]] = set()

    def _observe(self, graph: CapturedGraph, inputs: list[Any], outputs: Any, given: list[Any]) -> None:
        key = (graph.index, input_signature(inputs))
        if key in self._judged:
            return
        self._judged.add(key)
        try:
            mutated = mutated_inputs(graph.gm, inputs)
            eager, fp64 = _references_drawing_like(graph, inputs, mutated) if graph.has_random_ops else \
                reference_outputs(graph.gm, inputs, mutated=mutated)
        except RandomDrawMismatch as error:
            self.unchecked.append(f"{graph.label}: its eager run draws random numbers unlike the compiled "
                                  f"call ({error})")
            return
        leaves = compare_graph_outputs([*outputs, *(given[index] for index in mutated)], eager, fp64, self.tol,
                                       self.check_non_float, f"{graph.kind}_out",
                                       unwritten_elements(graph.gm, inputs, mutated=mutated), mutated)
        ratios = [ratio for ratio in (self.judged.get(graph.index), Comparison(leaves).worst_ratio) if ratio is not None]
        self.judged[graph.index] = max(ratios, default=None)
        failing = [leaf for leaf in leaves if not leaf.passed]
        if failing:
            note = FALLBACK_RANDOM_NOTE if graph.has_random_ops else ""
            self.failures.append(GraphFailure(
                graph, inputs, Status.FAIL_ACCURACY,
                f"{len(failing)} of {len(leaves)} outputs of {graph.label} deviate beyond the fp64 rule"
                + (f"; {note}" if note else ""),
                leaves, fallback_random=graph.has_random_ops,
            ))
        elif self.intermediates and graph.has_random_ops:
            self.unchecked.append(f"{graph.label}: intermediates not judged (the graph draws random numbers, "
                                  "which a recompiled cut would draw anew)")
        elif self.intermediates:
            divergence = find_masked_divergence(graph.gm, inputs, self.tol, self.probes.prepared.get(graph.index))
            if divergence is not None:
                self.failures.append(GraphFailure(
                    graph, divergence.inputs, Status.FAIL_ACCURACY, f"{graph.label}: {divergence.message}",
                    [divergence.leaf], divergence.gm,
                    divergence.note,
                ))

    def _observe_torch_level(self, graph: DynamoGraph, inputs: list[Any], outputs: Any, given: list[Any]) -> None:
        """Judge a torch-level graph's call when its post-AOT graphs did not fail on their own."""
        lowered = set(map(id, graph.lowered))
        if any(id(failure.graph) in lowered for failure in self.failures) or not graph.judgeable():
            return
        mutated = mutated_inputs(graph.gm, inputs)
        eager, fp64 = reference_outputs(graph.gm, inputs, mutated=mutated)
        leaves = compare_graph_outputs([*outputs, *(given[index] for index in mutated)], eager, fp64, self.tol,
                                       self.check_non_float, "out", unwritten_elements(graph.gm, inputs, mutated=mutated),
                                       mutated)
        failing = [leaf for leaf in leaves if not leaf.passed]
        if failing:
            self.failures.append(GraphFailure(
                graph.lowered[0], inputs, Status.FAIL_ACCURACY,
                f"{len(failing)} of {len(leaves)} outputs of {graph.label} deviate beyond the fp64 rule",
                leaves, note=TORCH_LEVEL_NOTE, dynamo=graph,
            ))

    def error_failures(self) -> list[GraphFailure]:
        """Graphs that failed to compile or whose compiled code raised."""
        failures = []
        for graph in self.capture.graphs:
            if out_of_memory(graph.compile_error or graph.runtime_error):
                failures.append(GraphFailure(graph, [], Status.OUT_OF_MEMORY,
                                             f"{graph.label} ran out of memory "
                                             f"{'compiling' if graph.compile_error else 'running'}"))
            elif graph.compile_error is not None:
                failures.append(GraphFailure(graph, graph.synthesized_inputs(), Status.FAIL_COMPILE,
                                             f"Inductor failed to compile {graph.label}"))
            elif graph.runtime_error is not None and graph.runtime_inputs is not None:
                failures.append(GraphFailure(graph, graph.runtime_inputs, Status.FAIL_RUNTIME,
                                             f"compiled code raised in {graph.label}"))
        return failures

    @contextlib.contextmanager
    def watching(self) -> Iterator[None]:
        with intercept_inductor(self.capture.hook, self.capture.dynamo_hook, EAGER_RNG_CONFIG):
            yield


def _references_drawing_like(graph: CapturedGraph, inputs: list[Any],
                             mutated: list[int]) -> tuple[list[Any], list[Any] | None]:
    """The graph run eagerly and in fp64, drawing the numbers its compiled call drew: compiled with
    ``fallback_random``, the call drew from eager's generators, whose states before it were kept;
    the fp64 run replays the eager run's draws. The generators are left as the call left them."""
    after = rng_states()
    assert graph.rng_before_call is not None
    set_rng_states(graph.rng_before_call)
    try:
        draws: list[tuple[Any, Any]] = []
        with recording_random_draws(draws):
            eager = run_graph(graph.gm, inputs, mutated=mutated)
        with replaying_random_draws(draws):
            fp64 = fp64_outputs(graph.gm, inputs, mutated=mutated)
    finally:
        set_rng_states(after)
    return eager, fp64
