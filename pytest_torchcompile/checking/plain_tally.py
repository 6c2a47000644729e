"""What the judging of a test's plain ``torch.compile`` graphs found: the graphs that fail, the
graphs judged with their worst error ratio, what could not be judged, and the graphs judged
without an fp64 reference."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import torch.fx

from pytest_torchcompile.checking.masked import device_of
from pytest_torchcompile.checking.outcome import GraphOutcome
from pytest_torchcompile.checking.runs import fp64_bytes
from pytest_torchcompile.common.leaves import LeafResult
from pytest_torchcompile.common.results import CaseResult
from pytest_torchcompile.common.verdict import Comparison, Status, out_of_memory
from pytest_torchcompile.judging.capture import CapturedGraph, DynamoGraph
from pytest_torchcompile.judging.judge import error_signature
from pytest_torchcompile.torch_internals.environment import (
    ENVIRONMENT_NOT_JUDGED,
    environment_failure,
)

SAME_PRECISION = "same-precision cosine check"
"""How a check judged without an fp64 reference is labelled (the fixture's check says the same)."""


class PlainTally:
    """The findings of one test's plain graphs, as its checker judges them."""

    def __init__(self, on_deviation: Callable[[str, str | None], None] | None = None) -> None:
        self.on_deviation = on_deviation
        """Told the Inductor config source and device of each accuracy failure as it is found (the
        child that will confirm it starts while the test goes on)."""
        self.failures: list[GraphOutcome] = []
        self.unchecked: list[str] = []
        """What could not be judged (a graph, or a judged graph's intermediates), each
        ``"<graph label>: <reason>"``."""
        self.without_fp64: dict[str, str] = {}
        """By graph label, why a graph judged on its outputs had no fp64 reference (the fp64 run
        raised, or did not fit in memory): it was judged by the same-precision rule."""
        self.judged: dict[int, float | None] = {}
        """Every graph judged on its outputs, by index: its worst error ratio over its calls
        (None while all its outputs are within allclose)."""
        self._raised_eagerly: dict[int, list[str]] = {}
        """By index, the post-AOT graphs whose eager run raised, with their lines in
        :attr:`unchecked`: a judging of their torch-level graph stands for them."""

    def stoppable(self, observe: Callable[..., None]) -> Callable[..., None]:
        """``observe``, a judging of a graph's call, leaving a line in :attr:`unchecked` where it
        is stopped from outside (pytest-timeout's signal fails the test from wherever it runs,
        Ctrl-C): the test's row then says why its graph has no verdict, and the test stops as
        it was told."""

        def observed(graph: CapturedGraph | DynamoGraph, *args: Any) -> None:
            try:
                observe(graph, *args)
            except Exception:
                raise
            except BaseException as stop:
                self.unchecked.append(
                    f"{graph.label}: not judged: the check was stopped before its verdict: "
                    f"{error_signature(stop, max_chars=300)}"
                )
                raise

        return observed

    def failed(self, failure: GraphOutcome) -> None:
        self.failures.append(failure)
        if self.on_deviation is not None:
            config_source = (
                failure.dynamo.config_source
                if failure.dynamo is not None
                else failure.graph.config_source
            )
            self.on_deviation(config_source, device_of(failure.inputs or []))

    def count_judged(self, index: int, leaves: list[LeafResult]) -> None:
        """A call of the graph at ``index`` judged: its worst ratio joins the graph's."""
        ratios = [
            ratio
            for ratio in (self.judged.get(index), Comparison(leaves).worst_ratio)
            if ratio is not None
        ]
        self.judged[index] = max(ratios, default=None)

    def raised_eagerly(self, graph: CapturedGraph, error: Exception) -> None:
        line = (
            f"{graph.label}: not judged: it raises when run eagerly on the inputs of its compiled "
            f"call ({error_signature(error, max_chars=300)})"
        )
        self._raised_eagerly.setdefault(graph.index, []).append(line)
        self.unchecked.append(line)

    def reference(
        self, label: str, gm: torch.fx.GraphModule, inputs: list[Any], fp64_error: Exception | None
    ) -> str:
        """What a graph's call is judged against: ``fp64``, or where its fp64 run raised
        (``fp64_error``), the labelled same-precision check, which says why, as the fixture's
        check does; the graph's reason is kept in :attr:`without_fp64`."""
        if fp64_error is None:
            return "fp64"
        cause = (
            f"the fp64 reference does not fit in memory: the graph's inputs alone take "
            f"{fp64_bytes(gm, (tuple(inputs), {})) / 2**30:.2f} GiB in fp64"
            if out_of_memory(fp64_error)
            else "the graph cannot run in fp64"
        )
        self.without_fp64.setdefault(
            label, f"{cause} ({error_signature(fp64_error, max_chars=300)})"
        )
        return f"{SAME_PRECISION}: {label}: {self.without_fp64[label]}"

    def stand_for_lowered(self, graph: DynamoGraph, worst_ratio: float | None) -> None:
        """A torch-level graph judged and passing counts as judged for its first post-AOT graph
        where none of them was (each raised when run eagerly): their lines leave
        :attr:`unchecked`, so the summary counts the graph once, as judged."""
        raised = [
            lowered.index for lowered in graph.lowered if lowered.index in self._raised_eagerly
        ]
        if not raised or any(lowered.index in self.judged for lowered in graph.lowered):
            return
        for index in raised:
            for line in self._raised_eagerly.pop(index):
                self.unchecked.remove(line)
        self.judged[raised[0]] = worst_ratio

    def lowered_failures(self, graph: DynamoGraph) -> list[int]:
        """The positions in :attr:`failures` of the failures of graphs lowered from ``graph`` (or
        of ``graph``)."""
        lowered = set(map(id, graph.lowered))
        return [
            index for index, failure in enumerate(self.failures) if id(failure.graph) in lowered
        ]

    def add_to_failure(self, index: int, leaves: list[LeafResult], judged: int) -> None:
        """The failing gradients of a training call (``leaves``, of ``judged`` results) added to
        the table of the failure at ``index``: its forward graph's."""
        failure = self.failures[index]
        self.failures[index] = dataclasses.replace(
            failure,
            non_float_only=Comparison(failure.leaves).fails_only_in_non_float,
            leaves=[*failure.leaves, *leaves],
            message=f"{failure.message}; {len(leaves)} of {judged} results of its training "
            "call's backward deviate too",
        )

    def error_failures(self, graphs: list[CapturedGraph], handled: bool) -> list[GraphOutcome]:
        """Graphs that failed to compile or whose compiled code raised; where the test ``handled``
        what they raised into it (its call returned), each is the test's (a ``pytest.raises``
        around a compile it expects to fail), reported as such. A compile error Dynamo suppressed
        (running the frame eagerly) reached no code of the test, and stays a failure."""
        failures = []
        for graph in graphs:
            error = graph.compile_error or graph.runtime_error
            environment = environment_failure(error)
            if environment is not None:
                # No bug of the compiler's: no repro, no minification, no failure of the check.
                self.unchecked.append(
                    f"{graph.label}: not judged: {ENVIRONMENT_NOT_JUDGED}: "
                    f"{error_signature(environment, max_chars=300)}"
                )
            elif error is not None:
                failures += _error_failure(graph, error, handled)
        return failures

    def other_graphs_result(self, nodeid: str, failures: list[GraphOutcome]) -> CaseResult | None:
        """The check standing for a test's plain graphs that did not fail: those judged (they
        pass) and what could not be judged, with the reasons. None when there are neither, so
        that a test that compiled nothing has no check."""
        failing = {failure.graph.index for failure in failures}
        passed = [ratio for index, ratio in self.judged.items() if index not in failing]
        if not passed and not self.unchecked:
            return None
        without_fp64 = self._passed_without_fp64(failures)
        ratios = [ratio for ratio in passed if ratio is not None]
        return CaseResult(
            nodeid,
            _passing_status(bool(passed), bool(without_fp64)),
            _summary(len(passed), len(self.unchecked)),
            reference=f"{SAME_PRECISION}: {'; '.join(without_fp64)}" if without_fp64 else "fp64",
            worst_ratio=max(ratios, default=None),
            graphs_judged=len(passed),
            unchecked=list(self.unchecked),
        )

    def _passed_without_fp64(self, failures: list[GraphOutcome]) -> list[str]:
        """A graph that passed without its fp64 reference passed the weaker, labelled check
        only: each such graph, with why."""
        failed = {
            failure.dynamo.label if failure.dynamo is not None else failure.graph.label
            for failure in failures
        }
        return [
            f"{label}: {why}" for label, why in self.without_fp64.items() if label not in failed
        ]


def _error_failure(graph: CapturedGraph, error: BaseException, handled: bool) -> list[GraphOutcome]:
    """The failure of a graph that raised ``error`` compiling or running, none where it is no
    failure of the compiler's to report (a runtime error without the inputs it raised on)."""
    doing = "compiling" if graph.compile_error is not None else "running"
    inputs: list[Any] = []
    if handled and not graph.compile_error_suppressed:
        status = Status.HANDLED_ERROR
        message = (
            f"{graph.label} raised {doing} ({error_signature(error, max_chars=300)}), "
            "and the test handled the error"
        )
    elif out_of_memory(error):
        status, message = Status.OUT_OF_MEMORY, f"{graph.label} ran out of memory {doing}"
    elif graph.compile_error is not None:
        status, message = Status.FAIL_COMPILE, f"Inductor failed to compile {graph.label}"
        inputs = graph.synthesized_inputs()
    elif graph.runtime_inputs is not None:
        status, message = Status.FAIL_RUNTIME, f"compiled code raised in {graph.label}"
        inputs = graph.runtime_inputs
    else:
        return []
    return [GraphOutcome(graph=graph, inputs=inputs, status=status, message=message)]


def _summary(passed: int, unchecked: int) -> str:
    """How many graphs pass and how many are unchecked, each where there are some."""
    parts = [f"{passed} graph(s) pass"] if passed else []
    if unchecked:
        parts.append(f"{unchecked} unchecked")
    return ", ".join(parts)


def _passing_status(judged: bool, without_fp64: bool) -> Status:
    if not judged:
        return Status.NOT_JUDGED
    return Status.NO_FP64_REFERENCE if without_fp64 else Status.PASS
