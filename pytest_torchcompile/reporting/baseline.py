"""CI gating against a baseline file (``baseline_file``: its format): which tests are known to
fail, and how.

The baseline gates the compiler, not the tests: a check whose model raised in its eager run
(``eager_fail``) failed as its test fails in a plain run (or the test handled the error, as a
``pytest.raises`` around the call does), so the baseline neither records nor judges it, and the
test's outcome is pytest's. A test is judged by its other checks (``gated_status``); one with no
other has no outcome. Nor does a baseline excuse any failure of a test but the one a check raised
(``CheckFailed``): a test's own error fails it whatever its row says.

A test that ran several checks is shown with one status (``test_status``), the first present in
this order: ``fail_compile``, ``fail_runtime``, ``fail_accuracy``, ``eager_fail``,
``eager_nondeterministic``, ``out_of_memory``, ``unconfirmed``, ``handled_error``,
``inconclusive``, ``no_fp64_reference``, ``not_judged``, ``pass``. *Failing* below means any
status other than ``pass``, ``unconfirmed``, ``handled_error``, ``inconclusive``,
``no_fp64_reference`` and ``not_judged``.

What a test's status means against its row (``decide``):

========================  ============================  ================
baseline row              this run                      outcome
========================  ============================  ================
pass, no_fp64_reference   pass, no_fp64_reference       ok
pass, no_fp64_reference   failing                       new_failure
failing status S          S                             expected_failure
failing status S          another failing status        new_failure
failing status            pass, no_fp64_reference       improved
flaky                     anything                      flaky
(no row)                  pass, no_fp64_reference       missing
(no row)                  failing                       new_failure
========================  ============================  ================

``new_failure`` fails the run; ``improved`` fails it only in strict mode (so that the baseline is
kept tight); the other outcomes never do.

Rows of tests that no longer exist are found by ``unknown_entries``: rows whose test file was
collected in this run but whose test id was not.
"""

from __future__ import annotations

import enum
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from pytest_torchcompile.common.files import (
    locked,
)
from pytest_torchcompile.common.results import CaseResult
from pytest_torchcompile.common.verdict import Status
from pytest_torchcompile.reporting.baseline_file import (
    UNGATED_STATUSES,
    Baseline,
    BaselineEntry,
    Expectation,
    load_baseline,
    resolved,
    write_baseline,
)

# Statuses under which a test counts as passing: without an fp64 reference the weaker check ran
# and agreed, a finding its repro does not confirm fails no test, and a check with nothing to judge
# found nothing, an error the test handled is the test's, and compiled code within the spread of
# an eager that disagrees with itself is eager's noise; none is a compiler failure.
PASSING_STATUSES = frozenset(
    {
        Status.PASS,
        Status.NO_FP64_REFERENCE,
        Status.EAGER_NONDETERMINISTIC,
        Status.UNCONFIRMED,
        Status.HANDLED_ERROR,
        Status.INCONCLUSIVE,
        Status.NOT_JUDGED,
    }
)

# The status that represents a test with several checks, most important first: a compiler failure
# is what the plugin exists to find; eager problems make the check meaningless; a weaker check
# that passed is still worth recording over a plain pass. Among compiler failures, a compile error
# hides anything a run could have shown, and a crash hides the accuracy comparison.
STATUS_PRIORITY: tuple[Status, ...] = (
    Status.FAIL_COMPILE,
    Status.FAIL_RUNTIME,
    Status.FAIL_ACCURACY,
    Status.EAGER_FAIL,
    Status.OUT_OF_MEMORY,
    Status.UNCONFIRMED,
    Status.HANDLED_ERROR,
    Status.EAGER_NONDETERMINISTIC,
    Status.INCONCLUSIVE,
    Status.NO_FP64_REFERENCE,
    Status.NOT_JUDGED,
    Status.PASS,
)


class BaselineOutcome(enum.StrEnum):
    OK = "ok"
    EXPECTED_FAILURE = "expected_failure"
    NEW_FAILURE = "new_failure"
    IMPROVED = "improved"
    MISSING = "missing"
    FLAKY = "flaky"

    @property
    def label(self) -> str:
        """How reports name the outcome; the ones that need attention are shouted."""
        return {
            BaselineOutcome.OK: "ok",
            BaselineOutcome.EXPECTED_FAILURE: "expected failure",
            BaselineOutcome.NEW_FAILURE: "NEW FAILURE",
            BaselineOutcome.IMPROVED: "IMPROVED",
            BaselineOutcome.MISSING: "missing",
            BaselineOutcome.FLAKY: "flaky",
        }[self]


@dataclass(frozen=True)
class Decision:
    """What one test's result means against the baseline."""

    outcome: BaselineOutcome
    message: str
    status: Status
    expected: Expectation | None
    """The baseline row's status; None when the test has no row."""
    fails_run: bool


def is_failing(status: Status) -> bool:
    return status not in PASSING_STATUSES


def test_status(results: Sequence[CaseResult]) -> Status:
    """The status of a test with one or more checks: the first of ``STATUS_PRIORITY`` present."""
    if not results:
        raise ValueError("test_status() needs at least one CaseResult")
    present = {result.status for result in results}
    return next(status for status in STATUS_PRIORITY if status in present)


# Tells pytest that this library function is not a test when a test module imports it.
test_status.__test__ = False  # type: ignore[attr-defined]


def gated_status(results: Sequence[CaseResult]) -> Status | None:
    """The status the baseline judges a test by: :func:`test_status` of its checks but those of
    :data:`UNGATED_STATUSES`; None where it has no other."""
    gated = [result for result in results if result.status not in UNGATED_STATUSES]
    return test_status(gated) if gated else None


def unknown_entries(baseline: Baseline, collected_ids: Iterable[str]) -> list[BaselineEntry]:
    """Rows for tests that no longer exist: their test file was collected in this run, but the
    test id itself was not (the test was renamed, removed or re-parametrized).

    Rows of files that were not part of the run are not reported, so running a subset of the suite
    is fine. ``collected_ids`` must hold every collected id of those files, deselected ones (``-k``,
    ``-m``) included; selecting single tests by node id narrows collection itself, so the caller
    should not report these rows in that case. Sorted by test id.
    """
    collected = set(collected_ids)
    collected_files = {_file_of(test_id) for test_id in collected}
    return sorted(
        (
            entry
            for test_id, entry in baseline.entries.items()
            if test_id not in collected and _file_of(test_id) in collected_files
        ),
        key=lambda entry: entry.test_id,
    )


def _file_of(test_id: str) -> str:
    return test_id.split("::", 1)[0]


def decide(test_id: str, status: Status, baseline: Baseline, strict: bool) -> Decision:
    """Judge one test's (aggregated) status against its baseline row; see the module docstring.
    Messages end with the row's note, so an expected failure shows its upstream bug link."""
    entry = baseline.get(test_id)
    if entry is None:
        if is_failing(status):
            return Decision(
                BaselineOutcome.NEW_FAILURE,
                f"{status}, and the test is not in the baseline",
                status,
                None,
                fails_run=True,
            )
        return Decision(
            BaselineOutcome.MISSING,
            f"{status}; the test is not in the baseline",
            status,
            None,
            fails_run=False,
        )
    expected = entry.expected
    if not isinstance(expected, Status):
        outcome, message, fails_run = (
            BaselineOutcome.FLAKY,
            f"{status} (flaky in the baseline)",
            False,
        )
    elif not is_failing(expected):
        if is_failing(status):
            outcome, message, fails_run = (
                BaselineOutcome.NEW_FAILURE,
                f"{status}, the baseline expects {expected}",
                True,
            )
        else:
            outcome, message, fails_run = BaselineOutcome.OK, str(status), False
    elif status == expected:
        outcome, message, fails_run = (
            BaselineOutcome.EXPECTED_FAILURE,
            f"still {status}, as the baseline records",
            False,
        )
    elif is_failing(status):
        outcome, message, fails_run = (
            BaselineOutcome.NEW_FAILURE,
            f"{status}, a different failure than the baseline's {expected}",
            True,
        )
    else:
        # Strict mode fails the run so that a fixed bug cannot silently come back later.
        advice = " (strict: record it in the baseline)" if strict else ""
        outcome, message, fails_run = (
            BaselineOutcome.IMPROVED,
            f"{status}, the baseline expects {expected}{advice}",
            strict,
        )
    if entry.note:
        message = f"{message} [{entry.note}]"
    return Decision(outcome, message, status, expected, fails_run)


# --- a run's use of the baseline --------------------------------------------------------------


def _first_repro(results: Sequence[CaseResult]) -> str | None:
    return next((result.repro_path for result in results if result.repro_path), None)


def _by_test(results: Iterable[CaseResult]) -> dict[str, list[CaseResult]]:
    grouped: dict[str, list[CaseResult]] = {}
    for result in results:
        grouped.setdefault(result.nodeid, []).append(result)
    return grouped


@dataclass(frozen=True)
class Gate:
    """One run's use of a baseline file.

    The process that runs a test judges it (:meth:`xfail_reason`, :meth:`failure_note`) so that its
    report carries the outcome; the controller judges the whole run once all results are in
    (:meth:`decisions`, :meth:`unknown`, :meth:`run_failures`) and rewrites the file on request
    (:meth:`update_file`). With ``update`` a baseline file that does not exist yet counts as empty.
    """

    baseline: Baseline
    strict: bool = False
    update: bool = False

    @classmethod
    def load(cls, path: str | os.PathLike[str], strict: bool = False, update: bool = False) -> Gate:
        path = Path(path)
        if update and not path.exists():
            return cls(Baseline(path, {}), strict, update)
        return cls(load_baseline(path), strict, update)

    @property
    def path(self) -> Path:
        return self.baseline.path

    def where(self, test_id: str) -> str:
        """``file:line`` of the test's row, or the file when it has none."""
        entry = self.baseline.get(test_id)
        return (
            f"{self.path}:{entry.line}"
            if entry is not None and entry.line is not None
            else str(self.path)
        )

    def decide(self, test_id: str, results: Sequence[CaseResult]) -> Decision | None:
        """The test's outcome; None when it ran no check the baseline gates."""
        status = gated_status(results)
        if status is None:
            return None
        return decide(test_id, status, self.baseline, self.strict)

    def decisions(self, results: Iterable[CaseResult]) -> dict[str, Decision]:
        """The outcome of every test with a check the baseline gates, by test id."""
        return {
            test_id: decision
            for test_id, checks in sorted(_by_test(results).items())
            if (decision := self.decide(test_id, checks)) is not None
        }

    def xfail_reason(self, test_id: str, results: Sequence[CaseResult]) -> str | None:
        """Why a failure a check raised into its test counts as expected (a recorded failure, or a
        flaky row), with its repro path and the baseline row; None when it is not excused. A test's
        own failure is never excused: the caller asks for a failure its check raised only."""
        decision = self.decide(test_id, results)
        if decision is None or not is_failing(decision.status):
            return None
        if decision.outcome not in (BaselineOutcome.EXPECTED_FAILURE, BaselineOutcome.FLAKY):
            return None
        reason = f"compile accuracy {decision.outcome.label}: {decision.message} (baseline {self.where(test_id)})"
        repro = _first_repro(results)
        return f"{reason}; repro: {repro}" if repro else reason

    def failure_note(self, test_id: str, results: Sequence[CaseResult]) -> str | None:
        """For a new failure: what the baseline expected and where; None for any other outcome."""
        decision = self.decide(test_id, results)
        if decision is None or decision.outcome is not BaselineOutcome.NEW_FAILURE:
            return None
        return f"{decision.outcome.label}: {decision.message} (baseline {self.where(test_id)})"

    def unknown(
        self, collected_ids: Iterable[str], narrowed_files: Iterable[str] = ()
    ) -> list[BaselineEntry]:
        """Rows of tests that no longer exist (:func:`unknown_entries`), leaving out the files whose
        collection a node id argument narrowed (``pytest tests/a.py::test_x``)."""
        narrowed = set(narrowed_files)
        return [
            entry
            for entry in unknown_entries(self.baseline, collected_ids)
            if _file_of(entry.test_id) not in narrowed
        ]

    def unknown_lines(self, unknown: Sequence[BaselineEntry]) -> list[str]:
        """One line per row of a test that no longer exists: an error under strict, else a warning."""
        level = "ERROR" if self.strict else "WARNING"
        return [
            f"{level} {self.where(entry.test_id)}: unknown test id {entry.test_id}: its file was collected "
            "but the test was not (renamed or removed?); delete the row or rerun with "
            "--compile-accuracy-update-baseline"
            for entry in unknown
        ]

    def run_failures(
        self, decisions: Mapping[str, Decision], unknown: Sequence[BaselineEntry]
    ) -> list[str]:
        """Why the run fails against the baseline; empty when it does not."""
        reasons = [
            f"{decision.outcome.label} {test_id}: {decision.message}"
            for test_id, decision in sorted(decisions.items())
            if decision.fails_run
        ]
        if self.strict:
            reasons.extend(
                f"unknown test id {entry.test_id} ({self.where(entry.test_id)}; strict)"
                for entry in unknown
            )
        return reasons

    def update_file(
        self, results: Iterable[CaseResult], unknown: Sequence[BaselineEntry] = ()
    ) -> str:
        """Record this run's statuses in the baseline file, dropping the rows of tests that no
        longer exist (``unknown``); a line saying what changed."""
        statuses = {
            test_id: status
            for test_id, checks in sorted(_by_test(results).items())
            if (status := gated_status(checks)) is not None
        }
        gone = {entry.test_id for entry in unknown}
        target = resolved(self.path)
        with locked(target.with_name(f".{target.name}")):
            # Read again under the lock: another run (a CI shard) may have written rows since this
            # one loaded the file, and they are kept.
            current = load_baseline(target) if target.exists() else Baseline(target, {})
            kept = {
                test_id: entry for test_id, entry in current.entries.items() if test_id not in gone
            }
            added, changed = _changes(statuses, kept)
            write_baseline(target, statuses, Baseline(target, kept))
        rows = len(set(kept) | set(statuses))
        return (
            f"baseline written to {self.path}: {rows} rows ({added} added, {changed} changed, "
            f"{len(gone)} removed, {rows - len(statuses)} kept of tests not run)"
        )


def _changes(statuses: Mapping[str, Status], kept: Mapping[str, BaselineEntry]) -> tuple[int, int]:
    """How many of ``statuses`` add a row, and how many change a ``kept`` one (a flaky row
    stays as it is)."""
    added = sum(1 for test_id in statuses if test_id not in kept)
    changed = sum(
        1
        for test_id, status in statuses.items()
        if test_id in kept and not kept[test_id].is_flaky and kept[test_id].expected != status
    )
    return added, changed
