"""The terminal section of a run: a row per test, the details of what needs a look, the counts,
the root causes and the baseline's outcomes."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from pytest_torchcompile.common.results import CaseResult, MinifyResult
from pytest_torchcompile.common.verdict import Status
from pytest_torchcompile.reporting.baseline import (
    BaselineOutcome,
    Decision,
    is_failing,
    test_status,
)
from pytest_torchcompile.reporting.cells import (
    baseline_summary,
    by_test,
    checks_summary,
    format_graphs,
    format_minify,
    format_ratio,
    format_seconds,
    graph_counts,
    graphs_text,
    printable,
)
from pytest_torchcompile.reporting.grouping import root_cause_lines
from pytest_torchcompile.reporting.layout import TerminalLayout

# Outcomes listed one by one under the terminal table: the ones a reader has to act on or know.
_NOTABLE_OUTCOMES = (
    BaselineOutcome.NEW_FAILURE,
    BaselineOutcome.IMPROVED,
    BaselineOutcome.MISSING,
    BaselineOutcome.FLAKY,
)


def terminal_lines(
    results: Sequence[CaseResult],
    decisions: Mapping[str, Decision] | None,
    layout: TerminalLayout = TerminalLayout(),
    recording: bool = False,
) -> list[str]:
    """A row per test (status, worst ratio, plain graphs judged and unchecked, baseline outcome,
    then the whole test id), each followed by what needs a look: the details of its failing
    checks (repro and minified paths) and its unchecked graphs with their reasons; then counts by
    status and, with a baseline, the outcomes: counts, and one line per test that is new failing,
    improved, missing (not while ``recording``: the baseline is being written) or flaky."""
    if not results and not decisions:
        return []
    lines = _table(results, decisions, layout) if layout.verbosity >= -1 else []
    lines.extend(layout.wrap(f"compile accuracy: {checks_summary(results)}", ""))
    counts = graph_counts(results)
    if counts is not None:
        lines.append(f"plain torch.compile graphs: {graphs_text(counts)}")
    lines.extend(root_cause_lines(results, layout.wrap))
    if decisions is not None:
        lines.extend(layout.wrap(f"baseline: {baseline_summary(decisions)}", ""))
        for outcome in _NOTABLE_OUTCOMES:
            if recording and outcome is BaselineOutcome.MISSING:
                continue
            for test_id, decision in sorted(decisions.items()):
                if decision.outcome is outcome:
                    lines.extend(
                        layout.wrap(f"{outcome.label} {test_id}: {decision.message}", "  ")
                    )
    return lines


def _table(
    results: Sequence[CaseResult], decisions: Mapping[str, Decision] | None, layout: TerminalLayout
) -> list[str]:
    """Aligned columns with the test id last, never cut: it can be pasted into pytest."""
    tests = by_test(results)
    outcomes = decisions or {}
    rows = [["status", "ratio", "graphs", "baseline"]]
    rows.extend(_row(checks, outcomes.get(nodeid)) for nodeid, checks in tests)
    shown = _shown_columns(rows, decisions is not None)
    widths = {column: max(len(row[column]) for row in rows) for column in shown}

    def line(row: list[str], test: str) -> str:
        return "  ".join([*(row[column].ljust(widths[column]) for column in shown), test])

    lines = []
    blank_ratio = False
    for row, (nodeid, checks) in zip(rows[1:], tests, strict=True):
        if layout.verbosity < 0 and not is_failing(test_status(checks)):
            continue
        blank_ratio = blank_ratio or row[1] == "-"
        lines.extend(_test_lines(line(row, printable(nodeid)), checks, layout))
    if not lines:
        return []
    legend = layout.wrap(RATIO_LEGEND, "") if blank_ratio else []
    return [line(rows[0], "test"), *lines, *legend]


def _row(checks: Sequence[CaseResult], decision: Decision | None) -> list[str]:
    """A test's cells: status, worst ratio, plain graphs, baseline outcome."""
    return [
        str(test_status(checks)),
        format_ratio(_worst_ratio(checks)),
        format_graphs(checks),
        decision.outcome.label if decision else "-",
    ]


def _shown_columns(rows: list[list[str]], gated: bool) -> list[int]:
    """The columns shown: plain graphs where some test has them, the baseline where ``gated``."""
    return [
        column
        for column, heading in enumerate(rows[0])
        if (heading != "graphs" or any(row[column] != "-" for row in rows[1:]))
        and (heading != "baseline" or gated)
    ]


def _test_lines(row_line: str, checks: Sequence[CaseResult], layout: TerminalLayout) -> list[str]:
    """A test's row, whole where the terminal has room (the test id can be pasted into pytest),
    else wrapped; then the details of its checks that need a look and its unchecked graphs."""
    lines = [row_line] if len(row_line) <= layout.width else layout.wrap(row_line, "")
    for check in checks:
        if _detailed(check, layout.verbosity):
            lines.extend(_check_details(check, layout))
    for check in checks:
        for entry in check.unchecked:
            lines.extend(layout.wrap(f"unchecked {layout.shown(entry)}", "    "))
    return lines


def _detailed(check: CaseResult, verbosity: int) -> bool:
    """Whether a check's details show: a passing check's (its message, ratio, compile time) only
    at -vv; a fixture check not judged says why (a plain graph's reason is its unchecked line)."""
    return (
        verbosity > 1
        or is_failing(check.status)
        or bool(check.unconfirmed)
        or check.status is Status.HANDLED_ERROR
        or (check.status is Status.NOT_JUDGED and check.graphs_judged is None)
    )


RATIO_LEGEND = (
    "ratio: worst rmse(compiled, fp64) / rmse(eager, fp64) of the outputs; '-' where "
    "no output was judged by the fp64 rule: outputs allclose to eager (within tol), "
    "integer or empty outputs, no fp64 reference (a same-precision check), or a failure "
    "before any output was compared"
)


def _worst_ratio(checks: Sequence[CaseResult]) -> float | None:
    return max(
        (check.worst_ratio for check in checks if check.worst_ratio is not None), default=None
    )


def _check_details(check: CaseResult, layout: TerminalLayout) -> list[str]:
    """The check's status and message, then its graph, reference and files, one per line."""
    message = layout.shown(check.message)
    lines = layout.wrap(f"{check.status}: {message}" if message else str(check.status), "    ")
    facts = _case_facts(check, layout)
    if check.minify is not None:
        facts.extend(_minify_facts(check.minify, layout))
        if check.minify.note:
            facts.append(("note", layout.shown(check.minify.note)))
    if layout.verbosity > 0:
        if check.worst_ratio is not None:
            facts.append(("worst ratio", format_ratio(check.worst_ratio)))
        if check.compile_seconds is not None:
            facts.append(("compile", format_seconds(check.compile_seconds)))
    for name, value in facts:
        lines.extend(layout.wrap(f"{name}: {value}", "      "))
    return lines


def _case_facts(check: CaseResult, layout: TerminalLayout) -> list[tuple[str, str]]:
    """The check's graph (where its message does not name it), reference other than fp64, repro
    and why it is unconfirmed or unwritten."""
    facts = []
    if check.graph and check.graph not in check.message:
        facts.append(("graph", layout.shown(check.graph)))
    if check.reference != "fp64":
        facts.append(("reference", layout.shown(check.reference)))
    if check.repro_path:
        facts.append(("repro", layout.shown(check.repro_path)))
    if check.unconfirmed:
        facts.append(("unconfirmed", layout.shown(check.unconfirmed)))
    if check.repro_unwritten is not None:
        facts.append(("repro not written", layout.shown(check.repro_unwritten)))
    return facts


def _minify_facts(minify: MinifyResult, layout: TerminalLayout) -> list[tuple[str, str]]:
    facts = [("minified", layout.shown(minify.path))] if minify.path else []
    if minify.bug_report_path:
        facts.append(("bug report", layout.shown(minify.bug_report_path)))
    facts.append(("minify", format_minify(minify)))
    if minify.stage_summary:
        facts.append(("stage", minify.stage_summary))
    return facts


def minified_section(checks: Sequence[CaseResult], layout: TerminalLayout) -> str:
    """What minifying a failed test's checks found (minified repro, minify line, stage), for the
    test's own failure report: the check failed before any of it was known."""
    lines = [
        line
        for check in checks
        if check.minify is not None
        for name, value in _minify_facts(check.minify, layout)
        for line in layout.wrap(f"{name}: {value}", "")
    ]
    return "\n".join(lines)
