"""The end of a run: its record, the verdict against the baseline and the exit status. The
report files are written by their own objects (``report_files``), which this end hands what they
read and whose failures to be written fail the run."""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import pytest

from pytest_torchcompile.common.results import CaseResult
from pytest_torchcompile.reporting.baseline import Decision, Gate
from pytest_torchcompile.reporting.baseline_file import BaselineEntry
from pytest_torchcompile.reporting.layout import TerminalLayout
from pytest_torchcompile.reporting.terminal import terminal_lines
from pytest_torchcompile.run.shard import Shard


@dataclass(frozen=True)
class RunRecord:
    """What a run found, as it ends: the controller's own, or the union of a split run's shards."""

    results: Sequence[CaseResult]
    collected_ids: Collection[str]
    """Every test id collected, deselected ones included."""
    selected_ids: Collection[str]
    """The test ids left to run once ``-k``, ``-m`` or a shard's split deselected the others."""
    narrowed_files: Collection[str]
    failed_reports: Sequence[tuple[str, str]]
    """(test id, phase) of every failed test report, as pytest counts them (xfails not)."""
    shard: Shard | None = None
    exitstatus: int | None = None
    """pytest's exit status before the baseline's say; None where not known."""
    baseline_digest: str | None = None
    """The sha256 of the baseline file the run was judged against; None without one."""
    failed_by_check: Collection[str] = ()
    """The tests whose call a check failed (``CheckFailed``, a repro test's verdict): the one
    failure of a test that a baseline excuses and a recording run records. Any other failed
    report is the test's own, which fails the run as it fails a plain run."""

    def to_json(self) -> dict[str, Any]:
        """The JSON report's ``run`` object (schema: ``report``)."""
        selected = set(self.selected_ids)
        return {
            "shard": None if self.shard is None else self.shard.to_dict(),
            "selected": sorted(selected),
            "deselected": sorted(set(self.collected_ids) - selected),
            "narrowed_files": sorted(self.narrowed_files),
            # Sorted, as the tests are: under xdist reports arrive in any order.
            "failed": [
                {
                    "nodeid": nodeid,
                    "when": when,
                    "by_check": when == "call" and nodeid in self.failed_by_check,
                }
                for nodeid, when in sorted(self.failed_reports)
            ],
            "exitstatus": self.exitstatus,
            "baseline_sha256": self.baseline_digest,
        }


def file_digest(path: Path) -> str | None:
    """The sha256 of the file's bytes; None where there is no such file."""
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except FileNotFoundError:
        return None


@dataclass(frozen=True)
class FinishedRun:
    """A run as its report files read it: what it found and its outcomes against the baseline."""

    record: RunRecord
    gate: Gate | None
    decisions: Mapping[str, Decision] | None
    """Each test's outcome against the baseline; None without one."""
    unknown: Sequence[BaselineEntry]
    """The baseline's rows of tests that no longer exist."""
    environment: Callable[[], Mapping[str, Any]]
    layout: TerminalLayout

    @property
    def results(self) -> Sequence[CaseResult]:
        return self.record.results

    @property
    def recording(self) -> bool:
        """Whether the run writes what it finds to the baseline (nothing in it fails the run)."""
        return self.gate is not None and self.gate.update

    # The files are read away from this machine: their messages name paths as the terminal does
    # and the home directory as ~; the JSON report's path fields stay absolute, for tools.
    @cached_property
    def public_results(self) -> list[CaseResult]:
        return [result.with_messages(self.layout.public) for result in self.results]

    @cached_property
    def public_decisions(self) -> Mapping[str, Decision] | None:
        return self.decisions and {
            test_id: dataclasses.replace(decision, message=self.layout.public(decision.message))
            for test_id, decision in self.decisions.items()
        }


@dataclass(frozen=True)
class Written:
    """What writing one report file came to."""

    lines: list[str] = field(default_factory=list)
    """What the run says of it (where it was written)."""
    failure: str | None = None
    """Why it could not be written: a failure of the run."""
    recorded_failures: int = 0
    """See :attr:`RunEnd.recorded_failures` (the baseline's file alone gives it)."""


WriteReports = Callable[[FinishedRun], Sequence[Written]]
"""Writes a run's report files, each in turn (pytest's hook, or ``report_files.writing``)."""


def conclude_run(
    record: RunRecord,
    gate: Gate | None,
    write_reports: WriteReports,
    environment: Callable[[], Mapping[str, Any]],
    layout: TerminalLayout | None = None,
    enabled: bool = True,
    features_off: Sequence[str] = (),
) -> RunEnd:
    """Judge a run against the baseline and have its report files written (``write_reports``).
    Returns the lines to show, the features the installed torch leaves off first, and the
    reasons the run fails (none when it does not): a file that could not be written is one."""
    layout = layout or TerminalLayout()
    run = _finished(record, gate, environment, layout)
    table = terminal_lines(record.results, run.decisions, layout, run.recording)
    written = write_reports(run)
    said = [*_baseline_lines(run, enabled), *(line for each in written for line in each.lines)]
    lines = [*_features_off_lines(features_off, layout), *table, *_wrapped(said, layout, "")]
    unwritten = [each.failure for each in written if each.failure is not None]
    failures = [*_baseline_failures(run), *unwritten]
    # A run whose reports could not be written fails for that, whatever the baseline says.
    against_baseline = gate is not None and not unwritten
    heading = "the run fails against the baseline" if against_baseline else "the run fails"
    recorded = sum(each.recorded_failures for each in written)
    return RunEnd(lines, failures, recorded, heading, _wrapped(failures, layout, "  "))


def _features_off_lines(features_off: Sequence[str], layout: TerminalLayout) -> list[str]:
    """A warning for each feature the installed torch leaves off, shown first."""
    return [wrapped for line in features_off for wrapped in layout.wrap(f"WARNING {line}", "")]


def _wrapped(texts: Sequence[str], layout: TerminalLayout, indent: str) -> list[str]:
    """``texts`` as the terminal shows them (paths under the rootdir relative), wrapped to it."""
    return [wrapped for text in texts for wrapped in layout.wrap(layout.shown(text), indent)]


def _finished(
    record: RunRecord,
    gate: Gate | None,
    environment: Callable[[], Mapping[str, Any]],
    layout: TerminalLayout,
) -> FinishedRun:
    if gate is None:
        return FinishedRun(record, None, None, [], environment, layout)
    decisions = gate.decisions(record.results)
    unknown = gate.unknown(record.collected_ids, record.narrowed_files)
    return FinishedRun(record, gate, decisions, unknown, environment, layout)


def _baseline_lines(run: FinishedRun, enabled: bool) -> list[str]:
    """What the baseline says of the run below its table: rows of tests gone, and a run that
    checked nothing."""
    if run.gate is None:
        return []
    lines = run.gate.unknown_lines(run.unknown)
    if not run.results:
        lines.append(
            f"baseline {run.gate.path}: no test ran a compile-accuracy check"
            + ("" if enabled else " (--compile-accuracy is off)")
        )
    return lines


def _baseline_failures(run: FinishedRun) -> list[str]:
    """Why the run fails against the baseline; a recording run writes what it finds to the
    baseline, and nothing in it fails the run."""
    if run.gate is None or run.recording:
        return []
    return run.gate.run_failures(run.decisions or {}, run.unknown)


@dataclass(frozen=True)
class RunEnd:
    """What the controller shows at the end of the run, and why the run fails (if it does)."""

    lines: list[str]
    failures: list[str]
    recorded_failures: int = 0
    """Failed test reports that are all compile-accuracy failures a recording run
    (``--compile-accuracy-update-baseline``) wrote to the baseline; 0 when there are others."""
    heading: str = "the run fails against the baseline"
    """What the failures are shown under: a run without a baseline, or whose reports could not
    be written, does not fail against a baseline."""
    failure_lines: list[str] = field(default_factory=list)
    """The failures as shown under the heading: each wrapped to the terminal, indented."""

    def exit_status(self, status: int, tests_failed: int) -> int:
        """The run's exit status, from pytest's ``status`` and its count of failed test reports:
        failing when the run fails against the baseline; passing when the only failures are the
        ones a recording run wrote to the baseline (they still show)."""
        if self.failures:
            return pytest.ExitCode.TESTS_FAILED if status == pytest.ExitCode.OK else status
        if (
            self.recorded_failures
            and status == pytest.ExitCode.TESTS_FAILED
            and tests_failed == self.recorded_failures
        ):
            return pytest.ExitCode.OK
        return status
