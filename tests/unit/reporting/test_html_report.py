"""The HTML report: one self-contained page, the tests that fail the run first, and for each
failing check its table, the deviation along the graph, the minifier's trajectory and its files
linked relative to the page. (``tests/runs/test_html_in_a_browser.py`` opens a real run's page in a
browser.)"""

from __future__ import annotations

import dataclasses
import re
from html.parser import HTMLParser
from pathlib import Path

from pytest_torchcompile.common.results import CaseResult, Deviation, MinifyStep
from pytest_torchcompile.common.verdict import Status
from pytest_torchcompile.reporting.html import deviation_caption, write_html_report

from test_report import decisions, failing_case, results  # isort: skip

DEVIATION = [
    Deviation("sin", "aten.sin", 1.0, True),
    Deviation("relu", "aten.relu", 1.5e6, False, True),
    Deviation("mul", "aten.mul", 3.0e6, False),
    Deviation("tanh", "aten.tanh", 1.2, True),
]
TRAJECTORY = [MinifyStep(0.8, 12, 1), MinifyStep(1.6, 1, 2), MinifyStep(2.4, 1, 3)]


class _Page(HTMLParser):
    """What a browser would fetch (every src and href) and the page's text."""

    def __init__(self) -> None:
        super().__init__()
        self.fetched: list[str] = []
        self.links: list[str] = []
        self.text: list[str] = []
        self.tags: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        for name, value in attrs:
            if name == "src" or (name == "href" and tag == "link"):
                self.fetched.append(value or "")
            elif name == "href":
                self.links.append(value or "")

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def page_of(tmp_path: Path, checks: list[CaseResult]) -> tuple[_Page, str]:
    repros = tmp_path / "repros" / "case"
    repros.mkdir(parents=True)
    path = tmp_path / "out" / "report.html"
    path.parent.mkdir()
    write_html_report(path, checks, decisions(), {"torch": "2.13.0", "python": "3.11.7"})
    source = path.read_text()
    page = _Page()
    page.feed(source)
    return page, source


def with_minify_data(tmp_path: Path) -> CaseResult:
    case = failing_case()
    assert case.minify is not None
    case_dir = tmp_path / "repros" / "case"
    minify = dataclasses.replace(
        case.minify,
        path=str(case_dir / "minified.py"),
        bug_report_path=str(case_dir / "bug_report.md"),
        deviation=DEVIATION,
        trajectory=TRAJECTORY,
    )
    return dataclasses.replace(case, repro_path=str(case_dir / "repro.py"), minify=minify)


def test_a_page_needs_nothing_from_the_network_and_runs_no_script(tmp_path: Path) -> None:
    page, source = page_of(tmp_path, [with_minify_data(tmp_path), *results()[1:]])
    assert page.fetched == []
    assert "script" not in page.tags
    assert not [link for link in page.links if re.match(r"[a-z]+:", link)]
    assert source.count("<svg") == 2


def test_the_test_that_fails_the_run_comes_first(tmp_path: Path) -> None:
    page, source = page_of(tmp_path, [with_minify_data(tmp_path), *results()[1:]])
    table = source.split('id="tests"', 1)[1].split("</table>", 1)[0]
    order = re.findall(r"<code>(tests/m\.py::[^<]+)</code>", table)
    assert order == ["tests/m.py::test_b[bf16]", "tests/m.py::test_a", "tests/m.py::test_c"]
    assert "NEW FAILURE: fail_accuracy, the baseline expects pass" in "".join(page.text)


def test_a_failing_check_shows_where_its_deviation_starts_and_its_files(tmp_path: Path) -> None:
    page, source = page_of(tmp_path, [with_minify_data(tmp_path)])
    text = "".join(page.text)
    assert "starts: relu (aten.relu)" in text
    assert "the deviation starts at relu (aten.relu), intermediate 2 of 4" in text
    assert deviation_caption(DEVIATION) == (
        "The deviation starts at intermediate 2 of 4, <code>relu</code> (aten.relu, "
        "1.5e+06x eager's error); it grows to 3e+06x at <code>mul</code>; 1 later values "
        "are within the rule again (masked)."
    )
    assert source.count('class="deviates"') == 2 and source.count('class="step"') == 3
    # Relative to the page, so that the files can be uploaded with it.
    assert {"../repros/case/repro.py", "../repros/case/minified.py"} <= set(page.links)
    assert "../repros/case/bug_report.md" in page.links
    assert "out[0]" in text and "FAIL" in text


def test_a_deviation_inside_a_fused_kernel_is_placed_there(tmp_path: Path) -> None:
    case = with_minify_data(tmp_path)
    assert case.minify is not None
    split = [dataclasses.replace(point, passed=True, starts=False) for point in DEVIATION]
    minify = dataclasses.replace(
        case.minify,
        deviation=split,
        ops=["prims.iota", "aten.mul.Tensor"],
        stage_summary="deviation appears in Inductor's lowering of aten.mul",
    )
    page, _ = page_of(tmp_path, [dataclasses.replace(case, minify=minify)])
    text = "".join(page.text)
    assert (
        "inside a kernel fusing the minimal graph's ops: prims.iota, aten.mul.Tensor; deviation "
        "appears in Inductor's lowering of aten.mul" in text
    )
    assert "All 4 intermediates are within the rule once the graph returns them" in text


def test_an_integer_value_that_differs_is_drawn_at_the_top(tmp_path: Path) -> None:
    case = with_minify_data(tmp_path)
    assert case.minify is not None
    exact = [
        Deviation("arange", "aten.arange", None, True),
        Deviation("mul", "aten.mul.Tensor", float("inf"), False, True),
    ]
    minify = dataclasses.replace(case.minify, deviation=exact)
    page, source = page_of(tmp_path, [dataclasses.replace(case, minify=minify)])
    assert "the deviation starts at mul (aten.mul.Tensor), intermediate 2 of 2" in "".join(
        page.text
    )
    assert "mul (aten.mul.Tensor): differs where eager is exact" in source
    assert "<code>mul</code> (aten.mul.Tensor, differs where eager is exact)" in source


def test_what_a_test_id_or_message_holds_is_shown_never_run(tmp_path: Path) -> None:
    hostile = CaseResult(
        "t.py::test_x[<script>alert(1)</script>]",
        Status.FAIL_COMPILE,
        message='<img src="http://example.org/x.png">',
    )
    page, _ = page_of(tmp_path, [hostile])
    assert page.fetched == [] and "script" not in page.tags
    assert "<script>alert(1)</script>" in "".join(page.text)


def test_a_passing_run_has_no_failing_section(tmp_path: Path) -> None:
    passing = [CaseResult("t.py::a", Status.PASS, worst_ratio=1.0)]
    page, source = page_of(tmp_path, passing)
    assert "Failing checks" not in source
    assert "1 check in 1 test: 1 pass" in "".join(page.text)


def test_without_a_deviation_profile_the_minimal_graph_says_where(tmp_path: Path) -> None:
    case = with_minify_data(tmp_path)
    assert case.minify is not None
    minify = dataclasses.replace(case.minify, deviation=[], ops=["aten.mul", "aten.arange"])
    page, _ = page_of(tmp_path, [dataclasses.replace(case, minify=minify)])
    assert "in the minimal graph's ops: aten.mul, aten.arange" in "".join(page.text)
