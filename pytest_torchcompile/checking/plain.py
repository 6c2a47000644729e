"""Check the graphs of plain ``torch.compile`` calls a test makes, without changing the test.

While a test runs, every graph Inductor compiles is captured; each call of a captured graph is
judged on its real inputs against the same graph run eagerly in its own dtype and in fp64. Graph
breaks are fine: each graph is judged on its own, and the report names it (index, code location).
The torch-level graph each compile starts from is judged too (:mod:`torch_level`). This module
intercepts the compiles and calls and judges the post-AOT graphs' calls
(:mod:`graph_calls`); what they find is kept in a :class:`~.plain_tally.PlainTally`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import torch

from pytest_torchcompile.checking.aside import aside
from pytest_torchcompile.checking.graph_calls import (
    CallJudgement,
    again_at_full_fp32,
    call_recurs,
    eager_references,
    rule_named,
)
from pytest_torchcompile.checking.masked import (
    ConcurrentProbes,
    ProbeChildren,
    find_masked_deviation,
)
from pytest_torchcompile.checking.outcome import GraphOutcome
from pytest_torchcompile.checking.plain_tally import PlainTally
from pytest_torchcompile.checking.torch_level import TorchLevelJudge
from pytest_torchcompile.common.leaves import LeafResult
from pytest_torchcompile.common.verdict import Comparison, Status
from pytest_torchcompile.judging.capture import (
    CapturedGraph,
    DynamoGraph,
    GraphCapture,
    input_signature,
)
from pytest_torchcompile.judging.copies import clone_values
from pytest_torchcompile.judging.isolation.process_setup import config_patches
from pytest_torchcompile.judging.judge import devices_of, error_signature
from pytest_torchcompile.judging.precision import at_full_fp32, full_fp32_precision
from pytest_torchcompile.judging.references import unwritten_elements
from pytest_torchcompile.judging.seeding import set_rng_states
from pytest_torchcompile.torch_internals.config import inductor_config
from pytest_torchcompile.torch_internals.interception import intercept_inductor
from pytest_torchcompile.torch_internals.rng import EAGER_RNG_CONFIG, RandomDrawMismatch


class GraphChecker:
    """Judges each (graph, input shapes) pair once, as the test calls it; its findings are kept
    in :attr:`tally`."""

    def __init__(
        self,
        tol: float,
        check_non_float: bool,
        intermediates: bool,
        probe_children: ProbeChildren | None = None,
        training_tol: float | None = None,
        capture: GraphCapture | None = None,
        on_deviation: Callable[[str, str | None], None] | None = None,
        on_lowering: Callable[[CapturedGraph], None] | None = None,
    ) -> None:
        self.tol = tol
        self.on_lowering = on_lowering
        """Told each graph Inductor receives from the block, before it compiles it."""
        self.training_tol = tol if training_tol is None else training_tol
        """For backward graphs and training calls judged end to end: gradients sum over a batch and
        carry the forward's rounding, as PyTorch's training accuracy runs allow for (the fixture's
        ``backward=True`` default too)."""
        self.check_non_float = check_non_float
        self.intermediates = intermediates
        self.probes = ConcurrentProbes(probe_children)
        self.capture = capture if capture is not None else GraphCapture(watching=False)
        """Where the watched compiles are recorded: a run's own (the checking runner's), so
        that code compiled in one test and called in another is judged there too."""
        self.tally = PlainTally(on_deviation)
        self.torch_level = TorchLevelJudge(self.tally, tol, self.training_tol, check_non_float)
        self._judged: set[tuple[int, tuple[Any, ...]]] = set()
        self._probed: set[int] = set()
        """The graphs whose intermediates were judged (on their first call that passed)."""

    def error_failures(self, handled: bool) -> list[GraphOutcome]:
        """The failures of the watched graphs that raised compiling or running
        (:meth:`PlainTally.error_failures`)."""
        return self.tally.error_failures(self.capture.graphs, handled)

    def _observe(
        self, graph: CapturedGraph, inputs: list[Any], outputs: Any, given: list[Any]
    ) -> None:
        """Judge a call of one of the test's post-AOT graphs; one that draws random numbers drew
        Inductor's own as the test compiled it, unlike eager's, and is judged through a side
        compile of its torch-level graph instead (:meth:`_judge_random_graph`)."""
        compiled = graph.compiled
        if not graph.has_random_ops:
            if compiled is not None and not at_full_fp32(bool(devices_of(inputs))):
                outputs, given = again_at_full_fp32(lambda args: compiled(list(args)), inputs)
            with full_fp32_precision():
                self._judge_call(graph, inputs, outputs, given)
        elif graph.dynamo is None:
            self.tally.unchecked.append(
                f"{graph.label}: not judged: it draws random numbers, and the torch-level "
                "graph to judge it through, compiled aside, is unknown"
            )

    def _observe_torch_level(
        self, graph: DynamoGraph, inputs: list[Any], outputs: Any, given: list[Any]
    ) -> None:
        """Judge a torch-level graph's call (:meth:`TorchLevelJudge.observe`); one whose graphs
        draw random numbers stands for them (:meth:`_judge_random_graph`)."""
        if any(lowered.has_random_ops for lowered in graph.lowered):
            with full_fp32_precision():
                self._judge_random_graph(graph, inputs)
            return
        self.torch_level.observe(graph, inputs, outputs, given)

    def _judge_call(
        self, graph: CapturedGraph, inputs: list[Any], outputs: Any, given: list[Any]
    ) -> None:
        """A call of a post-AOT graph judged on its outputs, once per graph and input shapes; a
        graph whose outputs pass is probed for a deviation a later op masks."""
        key = (graph.index, input_signature(inputs))
        if key in self._judged:
            return
        self._judged.add(key)
        try:
            inputs, mutated, (eager, fp64, fp64_error) = eager_references(graph, inputs)
        except RandomDrawMismatch as error:
            self.tally.unchecked.append(
                f"{graph.label}: its eager run draws random numbers unlike the compiled "
                f"call ({error})"
            )
            return
        except Exception as error:
            self.tally.raised_eagerly(graph, error)
            return
        reference = self.tally.reference(graph.label, graph.gm, inputs, fp64_error)
        judged = CallJudgement(
            graph.gm,
            inputs,
            False,
            mutated,
            eager,
            fp64,
            f"{graph.kind}_out",
            self._tol(graph),
            self.check_non_float,
            unwritten_elements(graph.gm, inputs, mutated=mutated),
        )
        compiled_results = [*outputs, *(given[index] for index in mutated)]
        leaves = (
            judged(compiled_results)
            if graph.has_random_ops  # eager again would draw otherwise than the call did
            else judged.measured(compiled_results)
        )
        self.tally.count_judged(graph.index, leaves)
        if any(not leaf.passed for leaf in leaves):
            recurs = call_recurs(graph, inputs, mutated, judged)
            self.tally.failed(_accuracy_failure(graph, inputs, leaves, reference, recurs))
            return
        if inconclusive := Comparison(leaves).inconclusive:
            self.tally.unchecked.append(
                f"{graph.label}: {len(inconclusive)} output(s) inconclusive, "
                f"{inconclusive[0].path}: {inconclusive[0].detail}"
            )
        if self.intermediates:
            self._probe(graph, inputs)

    def _tol(self, graph: CapturedGraph) -> float:
        return self.training_tol if graph.kind == "backward" else self.tol

    def _probe(self, graph: CapturedGraph, inputs: list[Any]) -> None:
        """A passing graph's intermediates judged (:func:`find_masked_deviation`), on its first
        call that passed: a graph with dynamic shapes runs the same code at each size, and a
        probe compiles anew for every one."""
        if graph.has_random_ops:
            self.tally.unchecked.append(
                f"{graph.label}: intermediates not judged (the graph draws random numbers, "
                "which a recompiled cut would draw anew)"
            )
            return
        if graph.index in self._probed:
            return
        self._probed.add(graph.index)
        try:
            deviation = find_masked_deviation(
                graph.gm, inputs, self._tol(graph), self.probes.prepared.get(graph.index)
            )
        except Exception as error:  # a defect of the probe, which must not fail the test's call
            self.tally.unchecked.append(
                f"{graph.label}: intermediates not judged: the probe raised "
                f"({error_signature(error, max_chars=300)})"
            )
            return
        if deviation is not None:
            self.tally.failed(
                GraphOutcome(
                    graph=graph,
                    inputs=deviation.inputs,
                    status=Status.FAIL_ACCURACY,
                    message=f"{graph.label}: {deviation.message}",
                    leaves=[deviation.shown_leaf],
                    gm=deviation.gm,
                    note=deviation.note,
                )
            )

    def _judge_random_graph(self, graph: DynamoGraph, inputs: list[Any]) -> None:
        """Judge the post-AOT graphs of a torch-level graph that draws random numbers: compiled
        aside (the test's own compile stays as the test made it) with Inductor's
        ``fallback_random``, run from the generators' states before the test's call, so that its
        compiled and eager runs draw alike (:func:`eager_references`); each of its graphs is
        judged under the index of the test's graph it stands for."""
        if graph.rng_before_call is None:
            return
        standing_for = iter(graph.lowered)

        def stand_for(side_graph: CapturedGraph) -> None:
            side_graph.index = next(standing_for, side_graph).index

        side = GraphCapture(observer=self._judge_call, lowering_observer=stand_for)
        try:
            with inductor_config({**config_patches(graph.config_source), **EAGER_RNG_CONFIG}):
                compiled = torch.compile(
                    graph.gm, backend=side.backend(), fullgraph=True, dynamic=False
                )
                set_rng_states(graph.rng_before_call)
                compiled(*clone_values(inputs, keep_grad=True))
        except Exception as error:
            self.tally.unchecked.append(
                f"{graph.label}: not judged: it draws random numbers, and its compile aside "
                f"with fallback_random raised ({error_signature(error, max_chars=300)})"
            )
        finally:
            side.stop()

    @contextlib.contextmanager
    def watching(self) -> Iterator[None]:
        """Judge the graphs the block compiles and the compiled graphs it calls (those compiled
        before it too, where they were compiled through :attr:`capture`). What the judging needs
        after the block is kept until :meth:`release`."""
        with (
            intercept_inductor(self.capture.hook, self.capture.dynamo_hook),
            self.capture.watch(
                _aside(self.tally.stoppable(self._observe)),
                _aside(self.tally.stoppable(self._observe_torch_level)),
                self._lowering,
            ),
        ):
            try:
                yield
            finally:
                if self.torch_level.training_calls:
                    with aside(), full_fp32_precision():
                        self.torch_level.judge_training_calls()
                self.tally.unchecked += [
                    f"{graph.label}: not judged: {graph.unrecordable}"
                    for graph in self.capture.graphs
                    if graph.unrecordable is not None
                ]

    def _lowering(self, graph: CapturedGraph) -> None:
        if graph.unrecordable is not None:
            return
        if self.on_lowering is not None:
            # Called inside the test's compile, which nothing of the plugin's may fail.
            with contextlib.suppress(Exception):
                self.on_lowering(graph)
        if self.intermediates:
            self.probes.prepare(graph)

    def release(self) -> None:
        """Drop the copies of the watched calls' inputs; the compiled code stays Dynamo's."""
        self.capture.end_watch()


def _accuracy_failure(
    graph: CapturedGraph, inputs: list[Any], leaves: list[LeafResult], reference: str, recurs: bool
) -> GraphOutcome:
    """A post-AOT graph's call whose outputs deviate."""
    failing = [leaf for leaf in leaves if not leaf.passed]
    message = (
        f"{len(failing)} of {len(leaves)} outputs of {graph.label} deviate beyond the "
        f"{rule_named(reference)}"
    )
    return GraphOutcome(
        graph=graph,
        inputs=inputs,
        status=Status.FAIL_ACCURACY,
        message=f"{message}; {SIDE_RANDOM_NOTE}" if graph.has_random_ops else message,
        leaves=leaves,
        fallback_random=graph.has_random_ops,
        reference=reference,
        recurs=recurs,
    )


SIDE_RANDOM_NOTE = (
    "the graph draws random numbers: judged as compiled aside with Inductor's fallback_random=True "
    "(the test's own compile keeps its config), so that compiled and eager runs draw the same "
    "numbers; the fp64 run replays eager's draws"
)


def _aside(observe: Callable[..., None]) -> Callable[..., None]:
    """``observe`` run as the plugin's work (:func:`aside`)."""

    def observed(*args: Any) -> None:
        with aside():
            observe(*args)

    return observed
