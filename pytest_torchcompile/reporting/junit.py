"""JUnit: the properties of a check on its test case, and a whole file for a run pytest wrote
none for (the merge of a split run's shards)."""

from __future__ import annotations

import os
import xml.etree.ElementTree as ET
from collections import Counter
from collections.abc import Callable, Mapping, Sequence

from pytest_torchcompile.common.files import atomic_write
from pytest_torchcompile.common.results import CaseResult
from pytest_torchcompile.reporting.baseline import BaselineOutcome, Decision, is_failing
from pytest_torchcompile.reporting.cells import by_test, format_ratio, printable

PATH_PROPERTIES = frozenset({"torchcompile_repro", "torchcompile_minified"})
"""The properties that name a file: absolute paths on the machine that ran, for tools, as the JSON
report's path fields are."""


def junit_properties(result: CaseResult, public: Callable[[str], str]) -> list[tuple[str, str]]:
    """``record_property`` pairs for one check; values that are absent (no repro, no minified
    file, no case id, no ratio) are left out rather than written empty. Every value but those of
    :data:`PATH_PROPERTIES` is a message, written through ``public`` (``TerminalLayout.public``:
    paths under the rootdir relative to it, the home directory as ``~``), as every report's
    messages are; every value with its control characters escaped (:func:`cells.printable`),
    which XML 1.0 does not hold."""
    minified = result.minify.path if result.minify else None
    candidates = [
        ("torchcompile_case", result.case_id),
        ("torchcompile_status", str(result.status)),
        (
            "torchcompile_worst_ratio",
            None if result.worst_ratio is None else format_ratio(result.worst_ratio),
        ),
        ("torchcompile_repro", result.repro_path),
        ("torchcompile_minified", minified),
        ("torchcompile_minify_stop", str(result.minify.stop) if result.minify else None),
        ("torchcompile_reference", result.reference),
        (
            "torchcompile_graphs_judged",
            None if result.graphs_judged is None else str(result.graphs_judged),
        ),
        ("torchcompile_unchecked", "; ".join(result.unchecked) or None),
        ("torchcompile_unconfirmed", result.unconfirmed),
    ]
    return [
        (name, printable(value if name in PATH_PROPERTIES else public(value), lines=True))
        for name, value in candidates
        if value is not None
    ]


def junit_xml(
    results: Sequence[CaseResult],
    decisions: Mapping[str, Decision] | None,
    failed_reports: Sequence[tuple[str, str]],
    public: Callable[[str], str],
    xfail_reasons: Mapping[str, str] | None = None,
) -> str:
    """A JUnit XML file of the run's tests, for a run pytest did not write one for (the merge of a
    split run's shards): a test case per test with a check or a failed report, with the checks'
    :func:`junit_properties` (their messages through ``public``); a failure where pytest counted
    one or the test fails the run against the baseline, skipped (xfail) where the baseline
    expects its failure, its message the reason a single run's xfail gives (``xfail_reasons``:
    the baseline row and the repro path) where known. Every text with its control characters
    escaped, as pytest's own JUnit writer escapes them: XML 1.0 holds none."""
    checks = dict(by_test(results))
    failed: dict[str, list[str]] = {}
    for nodeid, when in failed_reports:
        failed.setdefault(nodeid, []).append(when)
    suite = ET.Element("testsuite", name="pytest-torchcompile")
    counts = Counter[str]()
    for nodeid in sorted(set(checks) | set(failed)):
        case = _test_case(suite, nodeid, checks.get(nodeid, []), public)
        decision = decisions.get(nodeid) if decisions else None
        reason = (xfail_reasons or {}).get(nodeid)
        counted = _outcome(case, decision, failed.get(nodeid, []), reason)
        if counted is not None:
            counts[counted] += 1
    suite.set("tests", str(len(suite)))
    suite.set("failures", str(counts["failures"]))
    suite.set("errors", "0")
    suite.set("skipped", str(counts["skipped"]))
    root = ET.Element("testsuites")
    root.append(suite)
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"


def _test_case(
    suite: ET.Element, nodeid: str, checks: Sequence[CaseResult], public: Callable[[str], str]
) -> ET.Element:
    """A test's case in ``suite``, named as pytest names it, with its checks' properties."""
    *scope, name = nodeid.split("::")
    classname = (
        ".".join([scope[0].removesuffix(".py").replace("/", "."), *scope[1:]]) if scope else ""
    )
    case = ET.SubElement(suite, "testcase", classname=printable(classname), name=printable(name))
    properties = [pair for check in checks for pair in junit_properties(check, public)]
    if properties:
        holder = ET.SubElement(case, "properties")
        for key, value in properties:
            ET.SubElement(holder, "property", name=key, value=value)
    return case


def _outcome(
    case: ET.Element, decision: Decision | None, failed_in: Sequence[str], reason: str | None
) -> str | None:
    """A test case's failure (``failed_in``: the phases pytest counted failed) or xfail, and the
    count it adds to (None: it passed)."""
    if failed_in or (decision is not None and decision.fails_run):
        reasons = [f"failed in {when}" for when in failed_in]
        if decision is not None:
            reasons.append(f"compile accuracy {decision.outcome.label}: {decision.message}")
        ET.SubElement(case, "failure", message=printable("; ".join(reasons), lines=True))
        return "failures"
    if (
        decision is not None
        and decision.outcome in (BaselineOutcome.EXPECTED_FAILURE, BaselineOutcome.FLAKY)
        and is_failing(decision.status)
    ):
        shown = reason or f"compile accuracy {decision.outcome.label}: {decision.message}"
        ET.SubElement(case, "skipped", type="pytest.xfail", message=printable(shown, lines=True))
        return "skipped"
    return None


def write_junit(
    path: str | os.PathLike[str],
    results: Sequence[CaseResult],
    decisions: Mapping[str, Decision] | None,
    failed_reports: Sequence[tuple[str, str]],
    public: Callable[[str], str],
    xfail_reasons: Mapping[str, str] | None = None,
) -> None:
    """Write :func:`junit_xml` to ``path`` atomically."""
    atomic_write(
        path, junit_xml(results, decisions, failed_reports, public, xfail_reasons).encode()
    )
