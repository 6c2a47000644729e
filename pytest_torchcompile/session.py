"""What one pytest process knows about compile accuracy: settings, results, repros to minify."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import torch

from . import _torch_compat
from .capture import CapturedGraph
from .check import CheckOutcome, EagerRunError, check_model
from .graphcheck import GraphChecker, GraphFailure
from .oracle import Status, format_table
from .repro import ReproCase, slugify, unique_case_dir, write_repro
from .results import CaseResult, MinifyResult
from .settings import CheckSettings
from .standalone import ACCURACY, COMPILE_ERROR, RUNTIME_ERROR, error_signature

FAILURE_KINDS = {
    Status.FAIL_ACCURACY: ACCURACY,
    Status.FAIL_COMPILE: COMPILE_ERROR,
    Status.FAIL_RUNTIME: RUNTIME_ERROR,
}


@dataclass
class MinifyJob:
    """A repro waiting for the minify phase."""

    case_id: str
    nodeid: str
    repro_path: str
    timeout_s: float

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class AccuracySession:
    enabled: bool
    repro_root: Path
    base_settings: CheckSettings
    results: list[CaseResult] = field(default_factory=list)
    minify_jobs: list[MinifyJob] = field(default_factory=list)

    def settings_for(self, marker: pytest.Mark | None, overrides: dict[str, Any]) -> CheckSettings:
        from .settings import marker_settings

        return marker_settings(self.base_settings, marker).replace(overrides)

    def check(
        self,
        nodeid: str,
        fn: Callable[..., Any],
        args: Sequence[Any],
        kwargs: dict[str, Any],
        settings: CheckSettings,
        record_property: Callable[[str, object], None] | None = None,
    ) -> Any:
        """The fixture's work: run eagerly when checking is off; otherwise check, record, and
        fail the test with a readable report and a repro when the compiler is at fault."""
        if not self.enabled:
            return fn(*args, **kwargs)
        try:
            outcome = check_model(fn, args, kwargs, settings.check_options())
        except EagerRunError as error:
            self.results.append(CaseResult(nodeid, Status.EAGER_FAIL, str(error)))
            raise error.__cause__ or error from None
        result = CaseResult(
            nodeid=nodeid, status=outcome.status, message=outcome.message, reference=outcome.reference,
            worst_ratio=outcome.comparison.worst_ratio if outcome.comparison else None,
            leaves=outcome.comparison.leaves if outcome.comparison else [],
            compile_seconds=outcome.compile_seconds,
        )
        if outcome.status.is_compiler_failure and outcome.failing_graphs:
            graph = outcome.failing_graphs[0]
            others = len(outcome.failing_graphs) - 1
            notes = [f"{others} other graph(s) of this check also deviate"] if others else []
            self._record_failing_graph(result, graph, graph.runtime_inputs, settings, notes)
        self.results.append(result)
        if record_property is not None:
            for name, value in junit_fields(result):
                record_property(name, value)
        if outcome.passed:
            return outcome.compiled_output
        pytest.fail(failure_message(result, outcome), pytrace=False)

    def _write_repro(
        self, nodeid: str, graph: CapturedGraph, inputs: list[Any] | None, status: Status, message: str,
        settings: CheckSettings, notes: list[str],
    ) -> tuple[str, str]:
        kind = FAILURE_KINDS[status]
        error = graph.compile_error or graph.runtime_error
        if inputs is None:
            inputs = graph.synthesized_inputs(settings.seed)
            notes = [*notes, "inputs are random values of the traced shapes: the graph failed before it ran"]
        case = ReproCase(
            gm=graph.gm, inputs=inputs, kind=kind, title=f"{nodeid} :: {graph.label}", tol=settings.tol,
            check_non_float=not settings.ignore_non_float,
            expected_error=error_signature(error) if error is not None and kind != ACCURACY else None,
            error_pattern=settings.check_str, config_source=graph.config_source,
            grad_enabled=graph.kind != "inference" and torch.is_grad_enabled(),
            symbolic_sizes=graph.symbolic_sizes, status_line=f"{status}: {message}", notes=notes,
        )
        directory = unique_case_dir(self.repro_root, slugify(nodeid))
        path = write_repro(case, directory / "repro.py")
        return directory.name, str(path)

    def _record_failing_graph(
        self, result: CaseResult, graph: CapturedGraph, inputs: list[Any] | None, settings: CheckSettings,
        notes: list[str],
    ) -> None:
        result.graph = graph.label
        result.case_id, result.repro_path = self._write_repro(
            result.nodeid, graph, inputs, result.status, result.message, settings, notes)
        if settings.minify and settings.backend == "inductor":
            self.minify_jobs.append(
                MinifyJob(result.case_id, result.nodeid, result.repro_path, settings.minify_timeout))

    @contextlib.contextmanager
    def watch_graphs(self, nodeid: str, settings: CheckSettings) -> Iterator[None]:
        """Check every graph Inductor compiles while the block runs (plain ``torch.compile``
        calls of the test); fail the test, with a repro per failing graph, if any deviates."""
        if not self.enabled:
            yield
            return
        checker = GraphChecker(settings.tol, not settings.ignore_non_float)
        # Code compiled by an earlier test would be reused without reaching the capture hook.
        _torch_compat.reset()
        with _torch_compat.inductor_config(settings.inductor_config), checker.watching():
            try:
                yield
            finally:
                failures = checker.failures + checker.error_failures()
                for failure in failures:
                    result = CaseResult(nodeid, failure.status, failure.message,
                                        worst_ratio=max((leaf.ratio for leaf in failure.leaves
                                                         if leaf.ratio is not None), default=None),
                                        leaves=failure.leaves)
                    self._record_failing_graph(result, failure.graph, failure.inputs, settings, [])
                    self.results.append(result)
        if failures:
            pytest.fail(graph_failures_message(self.results[-len(failures):], failures), pytrace=False)

    def record_minified(self, case_id: str, result: MinifyResult) -> None:
        for case in self.results:
            if case.case_id == case_id:
                case.minify = result


def junit_fields(result: CaseResult) -> list[tuple[str, str]]:
    from .report import junit_properties

    return junit_properties(result)


def relative(path: str) -> str:
    try:
        return os.path.relpath(path)
    except ValueError:
        return path


def failure_message(result: CaseResult, outcome: CheckOutcome) -> str:
    lines = [f"compile accuracy: {result.status}: {result.message}"]
    if outcome.comparison is not None and outcome.comparison.leaves:
        lines.append(f"reference: {outcome.reference}")
        lines.append(format_table(outcome.comparison.leaves))
    if result.graph:
        lines.append(f"failing graph: {result.graph}")
    if result.repro_path:
        lines.append(f"repro: {result.repro_path}")
        lines.append(f"rerun: python {relative(result.repro_path)}")
    elif result.status.is_compiler_failure:
        lines.append("no repro: no graph reached Inductor" if not outcome.graphs
                     else "no repro: the failing graph could not be identified")
    return "\n".join(lines)


def graph_failures_message(results: list[CaseResult], failures: list[GraphFailure]) -> str:
    lines = [f"compile accuracy: {len(failures)} graph(s) compiled by this test fail"]
    for result, failure in zip(results, failures, strict=True):
        lines.append(f"{result.status}: {failure.message}")
        if failure.leaves:
            lines.append(format_table(failure.leaves))
        if result.repro_path:
            lines.append(f"repro: {result.repro_path}")
            lines.append(f"rerun: python {relative(result.repro_path)}")
    return "\n".join(lines)
