"""What every report format shows of a run's checks: ratios, minify lines, counts and their
summaries, checks grouped by test in sorted order (runs under pytest-xdist, whose results arrive
in any order, then compare cleanly), text with its control characters escaped."""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from itertools import groupby

from pytest_torchcompile.common.results import CaseResult, MinifyResult, StopReason
from pytest_torchcompile.common.verdict import Status
from pytest_torchcompile.reporting.baseline import BaselineOutcome, Decision

_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\ud800-\udfff\ufffe\uffff]")
_CONTROL_BUT_LINES = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff\ufffe\uffff]")


def printable(text: str, lines: bool = False) -> str:
    """``text`` with its control characters escaped visibly (``\\x1b``, ``\\t``), as pytest shows
    them in test ids, and the code points no UTF-8 file or XML 1.0 document holds (a lone
    surrogate, ``\\ufffe``): a test id or message holding an ANSI escape or a bell must not drive
    a terminal, nor reach a page, a Markdown summary or an XML file (which they would make
    invalid). With ``lines``, line breaks and tabs are kept, for a format that shows them."""
    control = _CONTROL_BUT_LINES if lines else _CONTROL
    return control.sub(lambda match: repr(match.group())[1:-1], text)


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


def format_seconds(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds:.1f} s"


def sorted_by_test(results: Sequence[CaseResult]) -> list[CaseResult]:
    # A stable sort keeps each test's checks in the order they ran.
    return sorted(results, key=lambda result: result.nodeid)


def by_test(results: Sequence[CaseResult]) -> list[tuple[str, list[CaseResult]]]:
    return [
        (nodeid, list(group))
        for nodeid, group in groupby(sorted_by_test(results), lambda r: r.nodeid)
    ]


def status_counts(statuses: Sequence[Status]) -> dict[str, int]:
    counted = Counter(statuses)
    return {str(status): counted[status] for status in Status}


def outcome_counts(decisions: Mapping[str, Decision]) -> dict[str, int]:
    counted = Counter(decision.outcome for decision in decisions.values())
    return {str(outcome): counted[outcome] for outcome in BaselineOutcome}


def join_counts(counts: Mapping[str, int]) -> str:
    return ", ".join(f"{n} {name}" for name, n in counts.items() if n) or "none"


def graph_counts(results: Sequence[CaseResult]) -> dict[str, int] | None:
    """How many plain ``torch.compile`` graphs the checks judged and left unchecked; None when
    none of them is a check of such graphs."""
    if all(result.graphs_judged is None for result in results):
        return None
    return {
        "judged": sum(result.graphs_judged or 0 for result in results),
        "unchecked": sum(len(result.unchecked) for result in results),
    }


def format_graphs(results: Sequence[CaseResult]) -> str:
    """E.g. ``3 judged, 1 unchecked``; ``-`` for checks of the fixture alone."""
    return graphs_text(graph_counts(results))


def graphs_text(counts: Mapping[str, int] | None) -> str:
    if counts is None:
        return "-"
    return f"{counts['judged']} judged" + (
        f", {counts['unchecked']} unchecked" if counts["unchecked"] else ""
    )


def counted(number: int, noun: str) -> str:
    """E.g. ``1 check``, ``3 checks``."""
    return f"{number} {noun}" if number == 1 else f"{number} {noun}s"


def checks_summary(results: Sequence[CaseResult]) -> str:
    """E.g. ``4 checks in 3 tests: 3 pass, 1 fail_accuracy``; ``1 check in 1 test: 1 pass``."""
    tests = len({result.nodeid for result in results})
    counts = status_counts([result.status for result in results])
    return f"{counted(len(results), 'check')} in {counted(tests, 'test')}: {join_counts(counts)}"


def status_summary(results: Sequence[CaseResult]) -> str:
    """E.g. ``4 checks in 3 tests: 3 pass, 1 fail_accuracy; plain torch.compile graphs: 5
    judged, 1 unchecked``."""
    counts = graph_counts(results)
    graphs = "" if counts is None else f"; plain torch.compile graphs: {graphs_text(counts)}"
    return f"{checks_summary(results)}{graphs}"


def baseline_summary(decisions: Mapping[str, Decision]) -> str:
    """E.g. ``1 NEW FAILURE, 1 IMPROVED, 5 ok`` (tests per outcome)."""
    counts = outcome_counts(decisions)
    return join_counts({outcome.label: counts[str(outcome)] for outcome in BaselineOutcome})
