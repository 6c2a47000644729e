"""The files a run's end writes, each a pytest plugin object that owns its file, as pytest's
``junitxml`` plugin owns its ``LogXML``: registered on the controller (or the only process) when
its setting names a file, it writes from its hook, :meth:`ReportHooks.pytest_torchcompile_write_report`,
once the run is judged. ``merge`` writes a merged run through the same objects."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import pytest

from pytest_torchcompile.reporting.baseline import Decision, Gate, is_failing
from pytest_torchcompile.reporting.baseline_file import BaselineError
from pytest_torchcompile.reporting.cells import by_test
from pytest_torchcompile.reporting.github import append_github_summary
from pytest_torchcompile.reporting.html import write_html_report
from pytest_torchcompile.reporting.json_report import write_json_report
from pytest_torchcompile.reporting.junit import write_junit
from pytest_torchcompile.run.conclusion import FinishedRun, RunRecord, WriteReports, Written


class ReportHooks:
    """The hook a report file writes from (added to pytest's by the plugin)."""

    @pytest.hookspec
    def pytest_torchcompile_write_report(self, run: FinishedRun) -> Written:  # type: ignore[empty-body]
        """Write this report file of the judged ``run``; every registered file is called."""


class ReportFile:
    """One file a run's end writes: where, and how its failure to be written is worded. One
    file that cannot be written keeps none of the others from being written."""

    what = "the report"
    """The file as a line names it."""
    name = "torchcompile-report"
    """The name it is registered under."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = path

    @pytest.hookimpl
    def pytest_torchcompile_write_report(self, run: FinishedRun) -> Written:
        try:
            return Written(self.write(run))
        except BaselineError as error:  # it names the file, and the line at fault
            return Written(failure=f"cannot write {self.what}: {error}")
        except OSError as error:
            # Its strerror leaves out the temporary file it was written through.
            return Written(
                failure=f"cannot write {self.what} {self.path}: {error.strerror or error}"
            )

    def write(self, run: FinishedRun) -> list[str]:
        """Write the file; the lines saying so."""
        raise NotImplementedError


class JsonReport(ReportFile):
    what, name = "the JSON report", "torchcompile-json-report"

    def write(self, run: FinishedRun) -> list[str]:
        environment = run.environment()
        record = run.record.to_json()
        write_json_report(self.path, run.public_results, run.public_decisions, environment, record)
        return [f"JSON report written to {self.path}"]


class HtmlReport(ReportFile):
    what, name = "the HTML report", "torchcompile-html-report"

    def write(self, run: FinishedRun) -> list[str]:
        write_html_report(self.path, run.public_results, run.public_decisions, run.environment())
        return [f"HTML report written to {self.path}"]


class GithubSummary(ReportFile):
    """The GitHub step summary: appended to, and only where the run has something to say."""

    what, name = "the GitHub step summary", "torchcompile-github-summary"

    def write(self, run: FinishedRun) -> list[str]:
        if run.results or run.gate is not None:
            public = run.layout.public
            readable = [result.with_messages(public, paths=True) for result in run.results]
            append_github_summary(self.path, readable, run.public_decisions)
        return []


class JunitReport(ReportFile):
    """The JUnit file of a merged run (a single run's is pytest's own, whose tests carry the
    checks as properties)."""

    what, name = "the JUnit file", "torchcompile-junit"

    def write(self, run: FinishedRun) -> list[str]:
        failed = run.record.failed_reports
        public = run.layout.public
        reasons = xfail_reasons(run)
        write_junit(self.path, run.results, run.public_decisions, failed, public, reasons)
        return [f"JUnit file written to {self.path}"]


def xfail_reasons(run: FinishedRun) -> dict[str, str]:
    """The reason a single run's xfail gives each test the baseline excuses (the baseline row,
    the repro path), as the files show it."""
    gate = run.gate
    if gate is None:
        return {}
    return {
        nodeid: run.layout.public(reason)
        for nodeid, checks in by_test(run.results)
        if (reason := gate.xfail_reason(nodeid, checks)) is not None
    }


class BaselineUpdate(ReportFile):
    """The baseline file rewritten with the run's statuses (``--compile-accuracy-update-baseline``)."""

    what, name = "the baseline", "torchcompile-baseline-update"

    def __init__(self, gate: Gate) -> None:
        super().__init__(gate.path)
        self.gate = gate

    @pytest.hookimpl
    def pytest_torchcompile_write_report(self, run: FinishedRun) -> Written:
        written = super().pytest_torchcompile_write_report(run)
        if written.failure is not None:
            return written
        recorded, line = recorded_failures(run.record, run.decisions or {})
        return Written([*written.lines, *([line] if line else [])], recorded_failures=recorded)

    def write(self, run: FinishedRun) -> list[str]:
        return [self.gate.update_file(run.results, run.unknown)]


def recorded_failures(
    record: RunRecord, decisions: Mapping[str, Decision]
) -> tuple[int, str | None]:
    """After a recording run wrote the baseline: how many failed test reports are failures it
    recorded (the call of a test that its check failed, whose status is failing) when they are
    all such, else 0; and a line saying so (None when no test failed that way)."""
    failing = {test_id for test_id, decision in decisions.items() if is_failing(decision.status)}
    recorded = sum(
        1
        for test_id, when in record.failed_reports
        if when == "call" and test_id in failing and test_id in record.failed_by_check
    )
    if not recorded:
        return 0, None
    others = len(record.failed_reports) - recorded
    line = (
        f"recording run: {recorded} test failure(s) from compile accuracy, recorded in the baseline: "
        "they do not fail this run"
    )
    if others:
        return 0, f"{line}; {others} other test failure(s) do"
    return recorded, f"{line} (exit status 0)"


def report_files(
    report: Path | None = None,
    html: Path | None = None,
    github_summary: str | None = None,
    junit: Path | None = None,
    gate: Gate | None = None,
) -> list[ReportFile]:
    """The files a run's end writes, in the order it names them: each one named, and the
    baseline where the gate updates it."""
    kinds: list[tuple[type[ReportFile], str | os.PathLike[str] | None]] = [
        (JsonReport, report),
        (HtmlReport, html),
        (GithubSummary, github_summary),
        (JunitReport, junit),
    ]
    files = [kind(path) for kind, path in kinds if path]
    if gate is not None and gate.update:
        files.append(BaselineUpdate(gate))
    return files


def writing(files: Sequence[ReportFile]) -> WriteReports:
    """Writes ``files`` in turn, as pytest's hook writes them where they are registered
    (:func:`register`): for a run outside pytest's (``merge``)."""

    def write(run: FinishedRun) -> list[Written]:
        return [file.pytest_torchcompile_write_report(run) for file in files]

    return write


def register(config: pytest.Config, files: Sequence[ReportFile]) -> None:
    """Register ``files`` as plugins, for pytest's hook to write them in their order: pluggy
    calls the implementations registered last first."""
    for file in reversed(files):
        config.pluginmanager.register(file, file.name)


def unregister(config: pytest.Config) -> None:
    """Unregister every report file :func:`register` registered."""
    for plugin in list(config.pluginmanager.get_plugins()):
        if isinstance(plugin, ReportFile):
            config.pluginmanager.unregister(plugin)


def hook_writing(config: pytest.Config) -> WriteReports:
    """Writes the files registered with ``config`` through pytest's hook."""
    hook: Callable[..., Sequence[Written]] = config.hook.pytest_torchcompile_write_report
    return lambda run: hook(run=run)
