"""Reports of a run's checks: terminal table, JSON file, GitHub step summary, JUnit properties.

The terminal table and the JSON report list checks grouped by test id in sorted order, so that
reports of runs with pytest-xdist (where results arrive in any order) compare cleanly; the GitHub
summary puts failing checks first so that they survive its size cap.

The JSON report's schema (``schema_version`` 1) is documented in ``docs/reports.md``, the one
place it is written; ``tests/unit/run/test_report_schema.py`` holds the two together.
"""

from __future__ import annotations

import importlib.metadata
import json
import math
import os
import re
import shutil
import textwrap
import xml.etree.ElementTree as ET
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import groupby
from pathlib import Path
from typing import Any

import pytest

from pytest_torchcompile.run.baseline import Decision, DecisionKind, is_failing, test_status
from pytest_torchcompile.run.files import atomic_write
from pytest_torchcompile.run.grouping import root_cause_lines, root_causes
from pytest_torchcompile.run.results import CaseResult, MinifyResult, StopReason
from pytest_torchcompile.run.verdict import Status

SCHEMA_VERSION = 1
MAX_WIDTH = 120
"""The terminal section wraps its text to the terminal's width, and to no more than this."""

# Outcomes listed one by one under the terminal table: the ones a reader has to act on or know.
_NOTABLE_KINDS = (DecisionKind.NEW_FAILURE, DecisionKind.IMPROVED, DecisionKind.MISSING, DecisionKind.FLAKY)



# --- cell formatting ------------------------------------------------------------------------


def format_ratio(ratio: float | None) -> str:
    if ratio is None:
        return "-"
    if math.isinf(ratio):
        return "inf"
    return f"{ratio:.2f}" if ratio < 1000 else f"{ratio:.3g}"


def format_minify(minify: MinifyResult | None) -> str:
    if minify is None:
        return "-"
    if minify.path is None:
        return f"not minified: {minify.stop.label}"
    text = f"{minify.ops_before} -> {minify.ops_after} ops, {minify.seconds:.1f} s, {minify.compiles} compiles"
    return text if minify.stop is StopReason.MINIMAL else f"{text}, {minify.stop.label}"


def _format_seconds(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds:.1f} s"


def _sorted_by_test(results: Sequence[CaseResult]) -> list[CaseResult]:
    # A stable sort keeps each test's checks in the order they ran.
    return sorted(results, key=lambda result: result.nodeid)


def _by_test(results: Sequence[CaseResult]) -> list[tuple[str, list[CaseResult]]]:
    return [(nodeid, list(group)) for nodeid, group in groupby(_sorted_by_test(results), lambda r: r.nodeid)]


def _status_counts(statuses: Sequence[Status]) -> dict[str, int]:
    counted = Counter(statuses)
    return {str(status): counted[status] for status in Status}


def _kind_counts(decisions: Mapping[str, Decision]) -> dict[str, int]:
    counted = Counter(decision.kind for decision in decisions.values())
    return {str(kind): counted[kind] for kind in DecisionKind}


def _join_counts(counts: Mapping[str, int]) -> str:
    return ", ".join(f"{n} {name}" for name, n in counts.items() if n) or "none"


def graph_counts(results: Sequence[CaseResult]) -> dict[str, int] | None:
    """How many plain ``torch.compile`` graphs the checks judged and left unchecked; None when
    none of them is a check of such graphs."""
    if all(result.graphs_judged is None for result in results):
        return None
    return {"judged": sum(result.graphs_judged or 0 for result in results),
            "unchecked": sum(len(result.unchecked) for result in results)}


def format_graphs(results: Sequence[CaseResult]) -> str:
    """E.g. ``3 judged, 1 unchecked``; ``-`` for checks of the fixture alone."""
    return _graphs_text(graph_counts(results))


def _graphs_text(counts: Mapping[str, int] | None) -> str:
    if counts is None:
        return "-"
    return f"{counts['judged']} judged" + (f", {counts['unchecked']} unchecked" if counts["unchecked"] else "")


def checks_summary(results: Sequence[CaseResult]) -> str:
    """E.g. ``4 checks in 3 tests: 3 pass, 1 fail_accuracy``."""
    tests = len({result.nodeid for result in results})
    counts = _status_counts([result.status for result in results])
    return f"{len(results)} checks in {tests} tests: {_join_counts(counts)}"


def status_summary(results: Sequence[CaseResult]) -> str:
    """E.g. ``4 checks in 3 tests: 3 pass, 1 fail_accuracy; plain torch.compile graphs: 5
    judged, 1 unchecked``."""
    counts = graph_counts(results)
    graphs = "" if counts is None else f"; plain torch.compile graphs: {_graphs_text(counts)}"
    return f"{checks_summary(results)}{graphs}"


def baseline_summary(decisions: Mapping[str, Decision]) -> str:
    """E.g. ``1 NEW FAILURE, 1 IMPROVED, 5 ok`` (tests per outcome)."""
    counts = _kind_counts(decisions)
    return _join_counts({kind.label: counts[str(kind)] for kind in DecisionKind})


# --- terminal -------------------------------------------------------------------------------


class _PathWrapper(textwrap.TextWrapper):
    """Breaks lines at spaces; a word longer than a line (a path, a test id) stays whole where
    the terminal has room for it, else breaks after its last ``/`` or ``::`` that fits, and only
    where none does, at the terminal's width."""

    def __init__(self, terminal_width: int, **options: Any) -> None:
        super().__init__(**options)
        self.terminal_width = terminal_width

    def _handle_long_word(self, reversed_chunks: list[str], cur_line: list[str], cur_len: int,
                          width: int) -> None:
        chunk = reversed_chunks[-1]
        room = width + self.terminal_width - self.width  # this line's, at the terminal's width
        if cur_len + len(chunk) <= room:
            cur_line.append(reversed_chunks.pop())
            return
        if cur_line and len(self.subsequent_indent) + len(chunk) <= self.terminal_width:
            return  # whole on the next line
        space_left = max(room - cur_len, 1)
        ends = [chunk.rfind("/", 0, space_left) + 1, chunk.rfind("::", 0, space_left - 1) + 2]
        end = max((end for end in ends if end > 1), default=0)
        if end == 0 and cur_line:
            return  # the word starts the next line, which has more room
        end = end or space_left
        cur_line.append(chunk[:end])
        reversed_chunks[-1] = chunk[end:]


_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")


def printable(text: str) -> str:
    """``text`` with its control characters escaped (``\\x1b``, ``\\t``), as pytest shows them
    in test ids: a test id or message holding an ANSI escape must not drive the terminal."""
    return _CONTROL.sub(lambda match: repr(match.group())[1:-1], text)


@dataclass(frozen=True)
class TerminalLayout:
    """How the terminal section is laid out for the terminal at hand."""

    width: int = 80
    """The terminal's width (pytest's); text wraps to it, and to no more than ``MAX_WIDTH``."""
    verbosity: int = 0
    """pytest's: 0 (and 1, ``-v``), a row per test and the details of failing checks; above 1,
    the details of every check too; -1 (``-q``), only the rows of failing tests; below -1, only
    the counts."""
    root: Path | None = None
    """Paths under this directory (the rootdir) are shown relative to it, as node ids are."""

    @classmethod
    def of(cls, config: pytest.Config) -> TerminalLayout:
        """The layout of pytest's terminal for ``config``'s run; before pytest's terminal is set up
        (at configure), or without one, the width pytest would take (``COLUMNS``, the terminal's)."""
        if config.pluginmanager.get_plugin("terminalreporter") is not None:
            width = config.get_terminal_writer().fullwidth
        else:
            width = shutil.get_terminal_size(fallback=(80, 24)).columns
        return cls(width, config.get_verbosity(), config.rootpath)

    @property
    def line_width(self) -> int:
        return max(min(self.width, MAX_WIDTH), 40)

    def shown(self, text: str) -> str:
        return text if self.root is None else text.replace(f"{self.root}{os.sep}", "")

    def wrap(self, text: str, indent: str, width: int | None = None) -> list[str]:
        """``text`` wrapped to ``width`` (default: the text's width) at spaces; a path or test id
        longer than the terminal at a ``/`` or ``::``. Control characters are shown escaped."""
        return _PathWrapper(max(self.width, 40), width=width or self.line_width, initial_indent=indent,
                            subsequent_indent=f"{indent}  ", break_on_hyphens=False).wrap(printable(text))

    def fit(self, text: str) -> str:
        """Lines of ``text`` wider than the terminal wrapped as :meth:`wrap` does, each under its
        own indent."""
        width = max(self.width, 40)
        lines = []
        for line in map(printable, text.splitlines()):
            if len(line) <= width:
                lines.append(line)
            else:
                body = line.lstrip(" ")
                lines.extend(self.wrap(body, line[:len(line) - len(body)], width))
        return "\n".join(lines)


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
        lines.append(f"plain torch.compile graphs: {_graphs_text(counts)}")
    lines.extend(root_cause_lines(results, layout.wrap))
    if decisions is not None:
        lines.extend(layout.wrap(f"baseline: {baseline_summary(decisions)}", ""))
        for kind in _NOTABLE_KINDS:
            if recording and kind is DecisionKind.MISSING:
                continue
            for test_id, decision in sorted(decisions.items()):
                if decision.kind is kind:
                    lines.extend(layout.wrap(f"{kind.label} {test_id}: {decision.message}", "  "))
    return lines


def _table(results: Sequence[CaseResult], decisions: Mapping[str, Decision] | None,
           layout: TerminalLayout) -> list[str]:
    """Aligned columns with the test id last, never cut: it can be pasted into pytest."""
    tests = _by_test(results)
    rows = [["status", "ratio", "graphs", "baseline"]]
    for nodeid, checks in tests:
        decision = decisions.get(nodeid) if decisions else None
        rows.append([str(test_status(checks)), format_ratio(_worst_ratio(checks)), format_graphs(checks),
                     decision.kind.label if decision else "-"])
    shown = [column for column, heading in enumerate(rows[0])
             if (heading != "graphs" or any(row[column] != "-" for row in rows[1:]))
             and (heading != "baseline" or decisions is not None)]
    widths = {column: max(len(row[column]) for row in rows) for column in shown}

    def line(row: list[str], test: str) -> str:
        return "  ".join([*(row[column].ljust(widths[column]) for column in shown), test])

    lines = []
    blank_ratio = False
    for row, (nodeid, checks) in zip(rows[1:], tests, strict=True):
        if layout.verbosity < 0 and not is_failing(test_status(checks)):
            continue
        blank_ratio = blank_ratio or row[1] == "-"
        # Whole where the terminal has room (the test id can be pasted into pytest), else wrapped.
        row_line = line(row, printable(nodeid))
        lines.extend([row_line] if len(row_line) <= layout.width else layout.wrap(row_line, ""))
        for check in checks:
            # A passing check's details (its message, ratio, compile time) only at -vv; a fixture
            # check not judged says why (a plain graph's reason is its unchecked line below).
            if layout.verbosity > 1 or is_failing(check.status) or check.unconfirmed \
                    or check.status is Status.HANDLED_ERROR \
                    or (check.status is Status.NOT_JUDGED and check.graphs_judged is None):
                lines.extend(_check_details(check, layout))
        for check in checks:
            for entry in check.unchecked:
                lines.extend(layout.wrap(f"unchecked {layout.shown(entry)}", "    "))
    if not lines:
        return []
    legend = layout.wrap(RATIO_LEGEND, "") if blank_ratio else []
    return [line(rows[0], "test"), *lines, *legend]


RATIO_LEGEND = ("ratio: worst rmse(compiled, fp64) / rmse(eager, fp64) of the outputs; '-' where "
                "no output was judged by the fp64 rule: outputs allclose to eager (within tol), "
                "integer or empty outputs, no fp64 reference (a same-precision check), or a failure "
                "before any output was compared")


def _worst_ratio(checks: Sequence[CaseResult]) -> float | None:
    return max((check.worst_ratio for check in checks if check.worst_ratio is not None), default=None)


def _check_details(check: CaseResult, layout: TerminalLayout) -> list[str]:
    """The check's status and message, then its graph, reference and files, one per line."""
    message = layout.shown(check.message)
    lines = layout.wrap(f"{check.status}: {message}" if message else str(check.status), "    ")
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
    if check.minify is not None:
        facts.extend(_minify_facts(check.minify, layout))
        if check.minify.note:
            facts.append(("note", layout.shown(check.minify.note)))
    if layout.verbosity > 0:
        if check.worst_ratio is not None:
            facts.append(("worst ratio", format_ratio(check.worst_ratio)))
        if check.compile_seconds is not None:
            facts.append(("compile", _format_seconds(check.compile_seconds)))
    for name, value in facts:
        lines.extend(layout.wrap(f"{name}: {value}", "      "))
    return lines


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
    lines = [line for check in checks if check.minify is not None
             for name, value in _minify_facts(check.minify, layout) for line in layout.wrap(f"{name}: {value}", "")]
    return "\n".join(lines)


# --- JSON -----------------------------------------------------------------------------------


def plugin_version() -> str:
    return importlib.metadata.version("pytest-torchcompile")


def _json_safe(value: Any) -> Any:
    """Strict JSON has no NaN or Infinity; spell them as strings (documented in the schema)."""
    if isinstance(value, float) and not math.isfinite(value):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    if isinstance(value, dict):
        return {key: _json_safe(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(item) for item in value]
    return value


def _decision_json(decision: Decision | None) -> dict[str, Any] | None:
    if decision is None:
        return None
    return {
        "kind": str(decision.kind),
        "message": decision.message,
        "expected": None if decision.expected is None else str(decision.expected),
        "fails_run": decision.fails_run,
    }


def json_report(
    results: Sequence[CaseResult],
    decisions: Mapping[str, Decision] | None,
    environment: Mapping[str, Any],
    run: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The report as JSON-ready data, as docs/reports.md describes it."""
    tests = _by_test(results)
    report = {
        "schema_version": SCHEMA_VERSION,
        "plugin_version": plugin_version(),
        "environment": dict(environment),
        "run": None if run is None else dict(run),
        "counts": {
            "checks": _status_counts([result.status for result in results]),
            "tests": _status_counts([test_status(checks) for _, checks in tests]),
            "baseline": None if decisions is None else _kind_counts(decisions),
            "graphs": graph_counts(results) or {"judged": 0, "unchecked": 0},
        },
        "tests": [
            {
                "nodeid": nodeid,
                "status": str(test_status(checks)),
                "baseline": _decision_json(decisions.get(nodeid)) if decisions is not None else None,
                "graphs": graph_counts(checks),
                "checks": [check.to_dict() for check in checks],
            }
            for nodeid, checks in tests
        ],
        "root_causes": [group.to_dict() for group in root_causes(results)],
    }
    return _json_safe(report)


def write_json_report(
    path: str | os.PathLike[str],
    results: Sequence[CaseResult],
    decisions: Mapping[str, Decision] | None,
    environment: Mapping[str, Any],
    run: Mapping[str, Any] | None = None,
) -> None:
    """Write :func:`json_report` to ``path`` atomically."""
    report = json_report(results, decisions, environment, run)
    atomic_write(path, (json.dumps(report, indent=2, allow_nan=False) + "\n").encode())


# --- GitHub step summary --------------------------------------------------------------------


def _markdown_cell(text: str, code: bool = False) -> str:
    text = text.replace("\r", " ").replace("\n", " ")
    if code and "`" not in text:
        text = f"`{text}`"
    # GitHub splits table cells on "|" even inside code spans unless it is escaped.
    return text.replace("|", "\\|")


def _summary_priority(result: CaseResult, decisions: Mapping[str, Decision] | None) -> int:
    decision = decisions.get(result.nodeid) if decisions else None
    if decision is not None and decision.fails_run:
        return 0
    return 1 if is_failing(result.status) else 2


def _markdown_row(result: CaseResult, decisions: Mapping[str, Decision] | None) -> str:
    decision = decisions.get(result.nodeid) if decisions else None
    cells = [
        _markdown_cell(result.nodeid, code=True),
        _markdown_cell(result.case_id or "-"),
        _markdown_cell(str(result.status)),
        format_ratio(result.worst_ratio),
        format_graphs([result]),
        _markdown_cell(decision.kind.label if decision else "-"),
        _markdown_cell(result.repro_path, code=True) if result.repro_path else "-",
        _markdown_cell(result.minify.path, code=True) if result.minify and result.minify.path else "-",
        _markdown_cell(format_minify(result.minify)),
    ]
    return "| " + " | ".join(cells) + " |\n"


GITHUB_ROOT_CAUSES = 10
"""Root causes the GitHub summary lists (the ones breaking most tests); a count says the rest."""


def _root_causes_markdown(results: Sequence[CaseResult]) -> str:
    """Where each group of failures appears, e.g. ``- deviation appears in Inductor's C++ codegen
    of aten.relu (ops `aten.relu`, accuracy): 2 tests``; nothing when no failure was attributed."""
    groups = root_causes(results)
    if not groups:
        return ""
    lines = [f"\n**Root causes:** {len(groups)}\n"]
    for group in groups[:GITHUB_ROOT_CAUSES]:
        ops = ", ".join(f"`{op}`" for op in group.ops)
        tests = "1 test" if len(group.tests) == 1 else f"{len(group.tests)} tests"
        lines.append(f"- {_markdown_cell(group.stage_summary or group.stage)} (ops {ops}, "
                     f"{_markdown_cell(group.failure_type)}): {tests}\n")
    if len(groups) > GITHUB_ROOT_CAUSES:
        lines.append(f"- … {len(groups) - GITHUB_ROOT_CAUSES} more\n")
    return "".join(lines)


def _utf8_size(text: str) -> int:
    return len(text.encode("utf-8"))


def github_summary_markdown(
    results: Sequence[CaseResult],
    decisions: Mapping[str, Decision] | None,
    max_bytes: int = 64_000,
) -> str:
    """A Markdown section for ``$GITHUB_STEP_SUMMARY``: counts, then a table with one row per check.

    Rows of tests that fail the run come first, then other failing checks, then the rest, so
    that what matters survives the size cap; rows that do not fit in ``max_bytes`` (UTF-8) are
    replaced by a final "… N more rows" line.
    """
    head = f"### pytest-torchcompile\n\n**Compile accuracy:** {status_summary(results)}\n"
    if decisions is not None:
        head += f"\n**Baseline:** {baseline_summary(decisions)}\n"
    head += _root_causes_markdown(results)
    head += (
        "\n| test | case | status | worst ratio | graphs | baseline | repro | minified | minify |\n"
        "|---|---|---|---|---|---|---|---|---|\n"
    )
    ordered = sorted(_sorted_by_test(results), key=lambda result: _summary_priority(result, decisions))
    rows = [_markdown_row(result, decisions) for result in ordered]
    full = head + "".join(rows)
    if _utf8_size(full) <= max_bytes:
        return full

    def footer(left_out: int) -> str:
        # The blank line ends the table: GitHub would read a following text line as another row.
        return f"\n… {left_out} more rows\n"

    budget = max_bytes - _utf8_size(head) - _utf8_size(footer(len(rows)))
    if budget < 0:
        raise ValueError(f"max_bytes={max_bytes} cannot hold even the summary's header")
    kept: list[str] = []
    for row in rows:
        budget -= _utf8_size(row)
        if budget < 0:
            break
        kept.append(row)
    return head + "".join(kept) + footer(len(rows) - len(kept))


def append_github_summary(
    path: str | os.PathLike[str],
    results: Sequence[CaseResult],
    decisions: Mapping[str, Decision] | None,
    max_bytes: int = 64_000,
) -> None:
    """Append :func:`github_summary_markdown` to ``path`` (the file ``$GITHUB_STEP_SUMMARY`` names;
    other steps' sections in it are kept)."""
    with Path(path).open("a", encoding="utf-8") as handle:
        handle.write(github_summary_markdown(results, decisions, max_bytes))


# --- JUnit ----------------------------------------------------------------------------------


def junit_properties(result: CaseResult) -> list[tuple[str, str]]:
    """``record_property`` pairs for one check; values that are absent (no repro, no minified
    file, no case id, no ratio) are left out rather than written empty."""
    minified = result.minify.path if result.minify else None
    candidates = [
        ("torchcompile_case", result.case_id),
        ("torchcompile_status", str(result.status)),
        ("torchcompile_worst_ratio", None if result.worst_ratio is None else format_ratio(result.worst_ratio)),
        ("torchcompile_repro", result.repro_path),
        ("torchcompile_minified", minified),
        ("torchcompile_minify_stop", str(result.minify.stop) if result.minify else None),
        ("torchcompile_reference", result.reference),
        ("torchcompile_graphs_judged", None if result.graphs_judged is None else str(result.graphs_judged)),
        ("torchcompile_unchecked", "; ".join(result.unchecked) or None),
        ("torchcompile_unconfirmed", result.unconfirmed),
    ]
    return [(name, value) for name, value in candidates if value is not None]


def junit_xml(
    results: Sequence[CaseResult],
    decisions: Mapping[str, Decision] | None,
    failed_reports: Sequence[tuple[str, str]],
) -> str:
    """A JUnit XML file of the run's tests, for a run pytest did not write one for (the merge of a
    split run's shards): a test case per test with a check or a failed report, with the checks'
    :func:`junit_properties`; a failure where pytest counted one or the test fails the run against
    the baseline, skipped (xfail) where the baseline expects its failure."""
    checks = dict(_by_test(results))
    failed: dict[str, list[str]] = {}
    for nodeid, when in failed_reports:
        failed.setdefault(nodeid, []).append(when)
    suite = ET.Element("testsuite", name="pytest-torchcompile")
    counts = Counter[str]()
    for nodeid in sorted(set(checks) | set(failed)):
        *scope, name = nodeid.split("::")
        classname = ".".join([scope[0].removesuffix(".py").replace("/", "."), *scope[1:]]) if scope else ""
        case = ET.SubElement(suite, "testcase", classname=classname, name=name)
        properties = [pair for check in checks.get(nodeid, []) for pair in junit_properties(check)]
        if properties:
            holder = ET.SubElement(case, "properties")
            for key, value in properties:
                ET.SubElement(holder, "property", name=key, value=value)
        decision = decisions.get(nodeid) if decisions else None
        if nodeid in failed or (decision is not None and decision.fails_run):
            reasons = [f"failed in {when}" for when in failed.get(nodeid, [])]
            if decision is not None:
                reasons.append(f"compile accuracy {decision.kind.label}: {decision.message}")
            ET.SubElement(case, "failure", message="; ".join(reasons))
            counts["failures"] += 1
        elif decision is not None and decision.kind in (DecisionKind.EXPECTED_FAILURE, DecisionKind.FLAKY) \
                and is_failing(decision.status):
            ET.SubElement(case, "skipped", type="pytest.xfail",
                          message=f"compile accuracy {decision.kind.label}: {decision.message}")
            counts["skipped"] += 1
    suite.set("tests", str(len(suite)))
    suite.set("failures", str(counts["failures"]))
    suite.set("errors", "0")
    suite.set("skipped", str(counts["skipped"]))
    root = ET.Element("testsuites")
    root.append(suite)
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"


def write_junit(
    path: str | os.PathLike[str],
    results: Sequence[CaseResult],
    decisions: Mapping[str, Decision] | None,
    failed_reports: Sequence[tuple[str, str]],
) -> None:
    """Write :func:`junit_xml` to ``path`` atomically."""
    atomic_write(path, junit_xml(results, decisions, failed_reports).encode())
