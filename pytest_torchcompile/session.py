"""What one pytest process knows about compile accuracy: settings, results, repros to minify."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
import torch

from . import _torch_compat
from .baseline import BaselineError, Decision, Gate, is_failing
from .capture import CapturedGraph, DynamoGraph
from .check import CheckOutcome, CompiledCache, EagerRunError, check_model
from .graphcheck import GraphChecker, GraphFailure
from .isolation import leaves_device_unusable
from .minify import repro_defect
from .oracle import Comparison, Status, format_table
from .repro import ReproCase, slugify, unique_case_dir, write_repro
from .results import CaseResult, MinifyResult
from .settings import CheckSettings, GatingSettings
from .standalone import (
    ACCURACY,
    COMPILE_ERROR,
    DYNAMO,
    EAGER_ERROR,
    POST_AOT,
    RUNTIME_ERROR,
    error_signature,
    full_fp32_precision,
)

if TYPE_CHECKING:
    from .report import TerminalLayout

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
    compiled_cache: CompiledCache = field(default_factory=CompiledCache)
    """Compiled models of the running test, reused across its checks (hypothesis examples)."""
    gating: GatingSettings | None = None
    gate: Gate | None = None
    """The baseline in use; every process loads it (workers judge the tests they run)."""
    collected_ids: set[str] = field(default_factory=set)
    """Every test id collected (deselected ones included); under xdist, sent by the workers."""
    _unreported: int = field(default=0, init=False, repr=False)
    """``results[_unreported:]`` were made in this process and not yet put on a test report."""
    _test_results: dict[str, list[CaseResult]] = field(default_factory=dict, init=False, repr=False)
    _run_end: RunEnd | None = field(default=None, init=False, repr=False)
    _failed_reports: list[tuple[str, str]] = field(default_factory=list, init=False, repr=False)
    """(test id, phase) of every failed test report received, as pytest counts them."""
    _environment: dict[str, Any] | None = field(default=None, init=False, repr=False)
    on_minify_job: Callable[[MinifyJob], None] | None = None
    """Told of each case queued for minification as soon as its repro is written."""
    devices_lost_in: str | None = None
    """The test whose compiled code hit a device-side error, after which no kernel can run on
    its device in this process (CUDA keeps the error for the rest of the process's life)."""

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
        supersede: bool = False,
    ) -> Any:
        """The fixture's work: run eagerly when checking is off; otherwise check, record, and
        fail the test with a readable report and a repro when the compiler is at fault.

        ``supersede`` (hypothesis tests): each example replaces the test's earlier ones, so the
        run keeps the example hypothesis reports last (the shrunk one) and minifies only that."""
        if not self.enabled:
            return fn(*args, **kwargs)
        if supersede:
            self._drop_earlier_checks(nodeid)
        try:
            outcome = check_model(fn, args, kwargs, settings.check_options(), self.compiled_cache)
        except EagerRunError as error:
            self.results.append(CaseResult(nodeid, Status.EAGER_FAIL, str(error)))
            raise error.__cause__ or error from None
        result = CaseResult(
            nodeid=nodeid, status=outcome.status, message=outcome.message, reference=outcome.reference,
            worst_ratio=outcome.comparison.worst_ratio if outcome.comparison else None,
            leaves=outcome.comparison.leaves if outcome.comparison else [],
            compile_seconds=outcome.compile_seconds, fallback_random=outcome.fallback_random,
        )
        if outcome.status.is_compiler_failure and outcome.failing_graphs:
            failing = outcome.failing_graphs[0]
            others = len(outcome.failing_graphs) - 1
            notes = [note for note in (failing.note, f"{others} other graph(s) of this check also deviate"
                                       if others else "") if note]
            self._record_failing_graph(result, failing.graph, failing.inputs, settings, notes, failing.gm,
                                       failing.dynamo)
        self.results.append(result)
        if record_property is not None:
            for name, value in junit_fields(result):
                record_property(name, value)
        if outcome.passed:
            return outcome.compiled_output
        pytest.fail(failure_message(result, outcome), pytrace=False)

    def _drop_earlier_checks(self, nodeid: str) -> None:
        earlier = [r for r in self.results[self._unreported:] if r.nodeid == nodeid]
        for result in earlier:
            self.results.remove(result)
            if result.case_id is not None:
                self._drop_minify_jobs({result.case_id})
                shutil.rmtree(self.repro_root / result.case_id, ignore_errors=True)
                (self.repro_root / f"{result.case_id}.claimed").unlink(missing_ok=True)

    def _drop_minify_jobs(self, case_ids: set[str | None]) -> None:
        """Forget the minify jobs of these cases; their test has not finished, so none is queued."""
        self.minify_jobs[:] = [job for job in self.minify_jobs if job.case_id not in case_ids]

    def _write_repro(
        self, nodeid: str, graph: CapturedGraph, inputs: list[Any] | None, status: Status, message: str,
        settings: CheckSettings, notes: list[str], gm: torch.fx.GraphModule | None,
        dynamo: DynamoGraph | None = None,
    ) -> tuple[str, str]:
        kind = FAILURE_KINDS[status]
        error = graph.compile_error or graph.runtime_error
        if inputs is None:
            inputs = graph.synthesized_inputs(settings.seed)
            notes = [*notes, "inputs are random values of the traced shapes: the graph failed before it ran"]
        if dynamo is not None:  # the graph Dynamo captured, compiled through the whole stack
            gm, label, config_source, sizes, level = dynamo.gm, dynamo.label, dynamo.config_source, [], DYNAMO
        else:
            gm, label, config_source, sizes, level = (gm if gm is not None else graph.gm, graph.label,
                                                      graph.config_source, graph.symbolic_sizes, POST_AOT)
        case = ReproCase(
            gm=gm, inputs=inputs, kind=kind, title=f"{nodeid} :: {label}", tol=settings.tolerance,
            check_non_float=not settings.ignore_non_float,
            expected_error=error_signature(error) if error is not None and kind != ACCURACY else None,
            error_pattern=settings.check_str, config_source=config_source,
            grad_enabled=graph.kind != "inference" and torch.is_grad_enabled(),
            symbolic_sizes=sizes, status_line=f"{status}: {message}", notes=notes, level=level,
        )
        directory = unique_case_dir(self.repro_root, slugify(nodeid))
        path = write_repro(case, directory / "repro.py")
        return directory.name, str(path)

    def _record_failing_graph(
        self, result: CaseResult, graph: CapturedGraph, inputs: list[Any] | None, settings: CheckSettings,
        notes: list[str], gm: torch.fx.GraphModule | None = None, dynamo: DynamoGraph | None = None,
    ) -> None:
        result.graph = dynamo.label if dynamo is not None else graph.label
        if result.status is Status.FAIL_RUNTIME and graph.host_copy is not None and gm is None:
            # The failing call's own copy, readable even where the error left the device unusable.
            gm, inputs = graph.host_copy.gm, graph.host_copy.inputs
            if not graph.host_copy.devices_usable():
                self.devices_lost_in = result.nodeid
                result.message += (" (a device-side error: the device is unusable to this process from "
                                   "now on, so its later checks here cannot run)")
        result.case_id, result.repro_path = self._write_repro(
            result.nodeid, graph, inputs, result.status, result.message, settings, notes, gm, dynamo)
        if self.devices_lost_in != result.nodeid:
            # Checked now, so that a repro that cannot run is reported at the test that made it.
            result.repro_defect = repro_defect(result.repro_path)
        if settings.minify and settings.backend == "inductor" and result.repro_defect is None:
            job = MinifyJob(result.case_id, result.nodeid, result.repro_path, settings.minify_timeout)
            self.minify_jobs.append(job)
            if self.on_minify_job is not None:
                self.on_minify_job(job)

    @contextlib.contextmanager
    def running_test(self, nodeid: str, settings: CheckSettings, watch: bool) -> Iterator[None]:
        """Around one test's call: its plain ``torch.compile`` graphs are checked when ``watch``;
        its compiled models are dropped at the end."""
        try:
            with full_fp32_precision() if self.enabled else contextlib.nullcontext():
                if watch:
                    with self.watch_graphs(nodeid, settings):
                        yield
                else:
                    yield
        finally:
            self.compiled_cache.clear()

    @contextlib.contextmanager
    def watch_graphs(self, nodeid: str, settings: CheckSettings) -> Iterator[None]:
        """Check every graph Inductor compiles while the block runs (plain ``torch.compile``
        calls of the test); fail the test, with a repro per failing graph, if any deviates."""
        if not self.enabled:
            yield
            return
        checker = GraphChecker(settings.tolerance, not settings.ignore_non_float, settings.intermediates)
        # Code compiled by an earlier test would be reused without reaching the capture hook.
        _torch_compat.reset_if_compiled()
        with _torch_compat.inductor_config(settings.inductor_config), checker.watching():
            try:
                yield
            finally:
                failures = checker.failures + checker.error_failures()
                failed = []
                for failure in failures:
                    result = CaseResult(nodeid, failure.status, failure.message,
                                        worst_ratio=Comparison(failure.leaves).worst_ratio,
                                        leaves=failure.leaves, fallback_random=failure.fallback_random,
                                        graphs_judged=1)
                    self._record_failing_graph(result, failure.graph, failure.inputs, settings,
                                               [failure.note] if failure.note else [], failure.gm, failure.dynamo)
                    failed.append(result)
                self.results.extend(failed)
                rest = other_graphs_result(nodeid, checker, failures)
                if rest is not None:
                    self.results.append(rest)
        if failures:
            pytest.fail(graph_failures_message(failed, failures), pytrace=False)

    def record_minified(self, case_id: str, result: MinifyResult) -> None:
        for case in self.results:
            if case.case_id == case_id:
                case.minify = result

    def name_minified_in_failures(self, reports: Sequence[pytest.TestReport], layout: TerminalLayout) -> None:
        """After the minify phase, before failures are printed: each failed test's report gains
        what minifying its checks found (minified repro, stage)."""
        from .report import minified_section

        minified: dict[str, list[CaseResult]] = {}
        for case in self.results:
            if case.minify is not None:
                minified.setdefault(case.nodeid, []).append(case)
        for report in reports:
            if report.when == "call" and report.nodeid in minified:
                report.sections.append(("compile accuracy: minified", minified_section(minified[report.nodeid], layout)))

    # --- gating and reports: results travel on test reports, so that xdist workers and a plain
    # run take one path; everything is decided and written once, on the controller.

    def configure_gating(self, gating: GatingSettings) -> None:
        """Load the baseline; a file that cannot be used stops the run before any test runs."""
        self.gating = gating
        if gating.report is not None:
            from .report import report_environment

            # Before any test runs: the Inductor config the run was given, not what tests left set.
            self._environment = report_environment()
        if gating.baseline is not None:
            try:
                self.gate = Gate.load(gating.baseline, gating.strict, gating.update_baseline)
            except BaselineError as error:
                raise pytest.UsageError(f"compile accuracy baseline: {error}") from None

    def annotate_report(self, item: pytest.Item, report: pytest.TestReport) -> None:
        """Where the test ran, as its report is made: move the checks made since the last report
        onto the report (for the controller), and at the end of the call phase judge the test
        against the baseline: a recorded (or flaky) failure becomes xfail with its repro path, a
        new failure names the baseline."""
        pending = self.results[self._unreported:]
        del self.results[self._unreported:]
        mine = self._test_results.setdefault(item.nodeid, [])
        mine.extend(result for result in pending if result.nodeid == item.nodeid)
        if report.when == "call":
            made = None if mine else repro_test_result(item, report)
            if made is not None:
                pending.append(made)
                mine.append(made)
            for result in pending:
                if result.graphs_judged is not None or result is made:
                    # The fixture records its own checks' properties as it makes them.
                    item.user_properties.extend(junit_fields(result))
            if self.gate is not None and mine and report.failed:
                reason = self.gate.xfail_reason(item.nodeid, mine)
                note = self.gate.failure_note(item.nodeid, mine)
                if reason is not None:
                    report.outcome = "skipped"
                    report.wasxfail = reason
                    if self.gating is not None and not self.gating.minify_expected:
                        self._drop_minify_jobs({result.case_id for result in mine})
                elif note is not None:
                    report.sections.append(("compile accuracy baseline", note))
        elif report.when == "teardown":
            self._test_results.pop(item.nodeid, None)
        if (report.failed and self.devices_lost_in not in (None, item.nodeid)
                and leaves_device_unusable(report.longreprtext)):
            report.sections.append(("compile accuracy", f"the device-side error in {self.devices_lost_in} left "
                                    "the device unusable to this process, which this failure follows from; "
                                    "run this test on its own"))
        if pending:
            setattr(report, RESULTS_ATTRIBUTE, json.dumps([result.to_dict() for result in pending]))

    def receive_report(self, report: pytest.TestReport) -> None:
        """On the controller (or the only process): take the checks a report carries."""
        data = getattr(report, RESULTS_ATTRIBUTE, None)
        if data:
            self.results.extend(CaseResult.from_dict(item) for item in json.loads(data))
        self._unreported = len(self.results)
        if report.failed and not hasattr(report, "wasxfail"):
            self._failed_reports.append((report.nodeid, report.when))

    def end_run(self, narrowed_files: set[str], layout: TerminalLayout | None = None) -> RunEnd:
        """On the controller, once, after the minify phase: judge the run against the baseline,
        write the JSON report, the GitHub step summary and the baseline update. Returns the lines
        to show and the reasons the run fails (none when it does not). Later calls return the
        first answer."""
        if self._run_end is not None:
            return self._run_end
        from .report import (
            TerminalLayout,
            append_github_summary,
            report_environment,
            terminal_lines,
            write_json_report,
        )

        gating = self.gating or GatingSettings(None, False, False, None)
        gate = self.gate
        decisions = gate.decisions(self.results) if gate is not None else None
        unknown = gate.unknown(self.collected_ids, narrowed_files) if gate is not None else []
        recording = gate is not None and gate.update
        lines = terminal_lines(self.results, decisions, layout or TerminalLayout(), recording)
        # A recording run writes what it finds to the baseline: nothing in it fails the run.
        failures = gate.run_failures(decisions or {}, unknown) if gate is not None and not recording else []
        recorded_failures = 0
        if gate is not None:
            lines.extend(gate.unknown_lines(unknown))
            if not self.results:
                lines.append(f"baseline {gate.path}: no test ran a compile-accuracy check"
                             + ("" if self.enabled else " (--compile-accuracy is off)"))
        try:
            if gating.report is not None:
                write_json_report(gating.report, self.results, decisions,
                                  self._environment or report_environment())
                lines.append(f"JSON report written to {gating.report}")
            github = os.environ.get("GITHUB_STEP_SUMMARY")
            if github and (self.results or gate is not None):
                append_github_summary(github, self.results, decisions)
            if gate is not None and gate.update:
                lines.append(gate.update_file(self.results, unknown))
                recorded_failures, line = self._recorded_failures(decisions or {})
                lines.extend([line] if line else [])
        except (BaselineError, OSError) as error:
            failures.append(f"cannot write a report: {error}")
        self._run_end = RunEnd(lines, failures, recorded_failures)
        return self._run_end

    def _recorded_failures(self, decisions: Mapping[str, Decision]) -> tuple[int, str | None]:
        """After a recording run wrote the baseline: how many failed test reports are failures it
        recorded (the call of a test whose status is failing) when they are all such, else 0;
        and a line saying so (None when no test failed that way)."""
        failing = {test_id for test_id, decision in decisions.items() if is_failing(decision.status)}
        recorded = sum(1 for test_id, when in self._failed_reports if when == "call" and test_id in failing)
        if not recorded:
            return 0, None
        others = len(self._failed_reports) - recorded
        line = (f"recording run: {recorded} test failure(s) from compile accuracy, recorded in the baseline: "
                "they do not fail this run")
        if others:
            return 0, f"{line}; {others} other test failure(s) do"
        return recorded, f"{line} (exit status 0)"


def other_graphs_result(nodeid: str, checker: GraphChecker, failures: list[GraphFailure]) -> CaseResult | None:
    """The check standing for a test's plain graphs that did not fail: those judged (they pass)
    and what could not be judged, with the reasons. None when there are neither, so that a test
    that compiled nothing has no check."""
    failing = {failure.graph.index for failure in failures}
    passed = [ratio for index, ratio in checker.judged.items() if index not in failing]
    if not passed and not checker.unchecked:
        return None
    parts = [f"{len(passed)} graph(s) pass"] if passed else []
    if checker.unchecked:
        parts.append(f"{len(checker.unchecked)} unchecked")
    ratios = [ratio for ratio in passed if ratio is not None]
    return CaseResult(nodeid, Status.PASS, ", ".join(parts), worst_ratio=max(ratios, default=None),
                      graphs_judged=len(passed), unchecked=list(checker.unchecked))


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
    lines += _repro_lines(result)
    if not result.repro_path and result.status.is_compiler_failure:
        lines.append("no repro: no graph reached Inductor" if not outcome.graphs
                     else "no repro: the failing graph could not be identified")
    return "\n".join(lines)


def graph_failures_message(results: list[CaseResult], failures: list[GraphFailure]) -> str:
    lines = [f"compile accuracy: {len(failures)} graph(s) compiled by this test fail"]
    for result, failure in zip(results, failures, strict=True):
        lines.append(f"{result.status}: {failure.message}")
        if failure.leaves:
            lines.append(format_table(failure.leaves))
        lines += _repro_lines(result)
    return "\n".join(lines)


def _repro_lines(result: CaseResult) -> list[str]:
    if not result.repro_path:
        return []
    if result.repro_defect is not None:
        return [f"repro: {result.repro_path}",
                f"the repro is broken, a defect of pytest-torchcompile (please report it): {result.repro_defect}"]
    return [f"repro: {result.repro_path}", f"rerun: python {relative(result.repro_path)}"]


RESULTS_ATTRIBUTE = "torchcompile_results"
"""Test report attribute with the checks made since the previous report, as a JSON list of
``CaseResult.to_dict()``; xdist carries report attributes from workers to the controller."""


@dataclass(frozen=True)
class RunEnd:
    """What the controller shows at the end of the run, and why the run fails (if it does)."""

    lines: list[str]
    failures: list[str]
    recorded_failures: int = 0
    """Failed test reports that are all compile-accuracy failures a recording run
    (``--compile-accuracy-update-baseline``) wrote to the baseline; 0 when there are others."""

    def exit_status(self, status: int, tests_failed: int) -> int:
        """The run's exit status, from pytest's ``status`` and its count of failed test reports:
        failing when the run fails against the baseline; passing when the only failures are the
        ones a recording run wrote to the baseline (they still show)."""
        if self.failures:
            return pytest.ExitCode.TESTS_FAILED if status == pytest.ExitCode.OK else status
        if self.recorded_failures and status == pytest.ExitCode.TESTS_FAILED and tests_failed == self.recorded_failures:
            return pytest.ExitCode.OK
        return status


# A generated repro's assertion message: its verdict line, e.g. "compile_error: RuntimeError: ...".
_REPRO_VERDICT = re.compile(r"^(?:E\s+)?(accuracy|compile_error|runtime_error|eager_error)\b", re.MULTILINE)
_REPRO_STATUSES = {
    ACCURACY: Status.FAIL_ACCURACY,
    COMPILE_ERROR: Status.FAIL_COMPILE,
    RUNTIME_ERROR: Status.FAIL_RUNTIME,
    EAGER_ERROR: Status.EAGER_FAIL,
}


def repro_test_result(item: pytest.Item, report: pytest.TestReport) -> CaseResult | None:
    """The check of a generated repro test (``pytest repro.py``), which judges its graph itself
    rather than through the fixture: ``pass`` when it passes (the bug is fixed), the recorded
    failure kind of its marker when it reproduces, the kind it printed when it fails differently.
    None for any other test, and for a repro test that failed for an unrelated reason."""
    marker = item.get_closest_marker("inductor_repro")
    kind = marker.kwargs.get("kind") if marker is not None else None
    if kind not in _REPRO_STATUSES:
        return None
    path = Path(str(item.path))

    def made(status: Status, message: str) -> CaseResult:
        return CaseResult(item.nodeid, status, message, case_id=path.parent.name, repro_path=str(path))

    if report.passed:
        return made(Status.PASS, f"the repro no longer fails ({kind} recorded)")
    if not report.failed:
        return None
    text = report.longreprtext
    if "REPRODUCED" in text:
        return made(_REPRO_STATUSES[kind], f"the repro still fails: {kind}")
    verdicts = _REPRO_VERDICT.findall(text) if "FAILS DIFFERENTLY" in text else []
    if verdicts:
        return made(_REPRO_STATUSES[verdicts[-1]], f"the repro fails differently: {verdicts[-1]}, recorded {kind}")
    return None


def narrowed_files(config: pytest.Config) -> set[str]:
    """Test files (as in node ids) whose collection a node id argument narrowed to some tests."""
    files = set()
    for arg in config.args:
        if "::" not in arg:
            continue
        path = Path(config.invocation_params.dir, arg.split("::", 1)[0]).resolve()
        try:
            files.add(path.relative_to(config.rootpath).as_posix())
        except ValueError:
            files.add(Path(os.path.relpath(path, config.rootpath)).as_posix())
    return files
