"""A test's error message or id may hold control characters (an ANSI colour, a bell) and code
points no UTF-8 file holds (a lone surrogate): no report passes them through. The HTML page,
the GitHub step summary, the JUnit file and the terminal show them escaped (``\\x1b``), as pytest
shows them in test ids; line breaks and tabs stay where a format shows them."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from pathlib import Path

from pytest_torchcompile.common.leaves import LeafResult
from pytest_torchcompile.common.results import CaseResult, Deviation, MinifyResult, StopReason
from pytest_torchcompile.common.verdict import Status
from pytest_torchcompile.reporting.baseline import BaselineOutcome, Decision
from pytest_torchcompile.reporting.cells import printable
from pytest_torchcompile.reporting.github import github_summary_markdown
from pytest_torchcompile.reporting.html import write_html_report
from pytest_torchcompile.reporting.junit import junit_properties, junit_xml
from pytest_torchcompile.reporting.layout import TerminalLayout
from pytest_torchcompile.reporting.terminal import terminal_lines

HOSTILE = "\x1b[31mred\x07 \x00\x08\x0b\x0c\r\x7f\x85\udc80\ufffe"
"""An ANSI colour and a bell, the other C0 and C1 controls XML 1.0 forbids or discourages, a
lone surrogate (an undecodable byte of a file name, as Python keeps it) and a non-character."""
NODEID = f"tests/test_m.py::test_bad[{HOSTILE}]"

LEFT_OUT = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff\ufffe\uffff]")
"""What no report may hold: every control character but the line break and the tab, and what
no UTF-8 file or XML document holds."""


def hostile_check() -> CaseResult:
    return CaseResult(
        NODEID,
        Status.FAIL_RUNTIME,
        f"RuntimeError: {HOSTILE}\nsecond line",
        case_id="tests_test_m.py__test_bad",
        repro_path="/r/tests_test_m.py__test_bad/repro.py",
        graph=f"graph 0 (forward) from tests/test_m.py:3 ({HOSTILE})",
        unchecked=[f"graph 1 (forward): {HOSTILE}"],
        unconfirmed=None,
        leaves=[LeafResult("out", (2,), "float32", False, "fp64 rmse", 1.0, 0.1, detail=HOSTILE)],
        minify=MinifyResult(
            3,
            1,
            1.0,
            2,
            StopReason.MINIMAL,
            path="/r/tests_test_m.py__test_bad/minified.py",
            note=HOSTILE,
            ops=[f"aten.relu{HOSTILE}"],
            stage="inductor.lowering",
            stage_summary=f"Inductor's lowering {HOSTILE}",
            failure_type=f"RuntimeError{HOSTILE}",
            deviation=[Deviation(f"relu{HOSTILE}", f"aten.relu{HOSTILE}", 9.5, False, True)],
        ),
    )


def decisions() -> dict[str, Decision]:
    # A baseline row's note is the file's text, as written.
    message = f"fail_runtime, a different failure than the baseline's pass [{HOSTILE}]"
    return {NODEID: Decision(BaselineOutcome.NEW_FAILURE, message, Status.FAIL_RUNTIME, None, True)}


def test_the_html_page_shows_control_characters_escaped(tmp_path: Path) -> None:
    page = tmp_path / "report.html"
    write_html_report(page, [hostile_check()], decisions(), {"torch": HOSTILE})

    text = page.read_text(encoding="utf-8")
    assert LEFT_OUT.findall(text) == []
    assert "RuntimeError: \\x1b[31mred\\x07 \\x00" in text
    assert "\\udc80\\ufffe\nsecond line" in text


def test_the_github_summary_shows_control_characters_escaped() -> None:
    markdown = github_summary_markdown([hostile_check()], decisions())

    assert LEFT_OUT.findall(markdown) == []
    assert "test_bad[\\x1b[31mred\\x07" in markdown


def test_the_junit_file_is_well_formed_xml_with_control_characters_escaped() -> None:
    public = TerminalLayout().public
    check = hostile_check()
    reason = f"compile accuracy expected failure: [{HOSTILE}]"

    failed = junit_xml([check], decisions(), [(NODEID, "call")], public)
    skipped = junit_xml(
        [check],
        {NODEID: Decision(BaselineOutcome.FLAKY, HOSTILE, Status.FAIL_RUNTIME, "flaky", False)},
        [],
        public,
        {NODEID: reason},
    )

    for text in (failed, skipped):
        assert LEFT_OUT.findall(text) == []
        ET.fromstring(text)  # a parser refuses a control character XML 1.0 forbids
    case = ET.fromstring(failed).find("testsuite/testcase")
    assert case is not None and case.get("name") == printable(f"test_bad[{HOSTILE}]")
    message = ET.fromstring(skipped).find("testsuite/testcase/skipped")
    assert message is not None and message.get("message") == printable(reason)
    properties = dict(junit_properties(check, public))
    assert properties["torchcompile_unchecked"] == printable(f"graph 1 (forward): {HOSTILE}")


def test_the_terminal_shows_control_characters_escaped() -> None:
    lines = terminal_lines([hostile_check()], decisions(), TerminalLayout(width=200))

    assert [line for line in lines if LEFT_OUT.search(line) or "\n" in line] == []
    assert any("RuntimeError: \\x1b[31mred\\x07" in line for line in lines)


def test_printable_keeps_line_breaks_and_tabs_only_where_asked() -> None:
    assert printable("a\tb\nc\x1bd") == "a\\tb\\nc\\x1bd"
    assert printable("a\tb\nc\x1bd\re", lines=True) == "a\tb\nc\\x1bd\\re"
