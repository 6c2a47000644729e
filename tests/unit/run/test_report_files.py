"""Each file a run's end writes is a plugin object that owns its file: registered on the
controller (or the only process) while its setting names the file, and written from its hook in
the order the run's end names the files."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_torchcompile.common.results import CaseResult
from pytest_torchcompile.common.verdict import Status
from pytest_torchcompile.reporting.layout import TerminalLayout
from pytest_torchcompile.run.conclusion import FinishedRun, RunRecord
from pytest_torchcompile.run.report_files import (
    GithubSummary,
    HtmlReport,
    JsonReport,
    hook_writing,
    report_files,
    writing,
)

TEST = "tests/test_a.py::test_a"


def finished(tmp_path: Path) -> FinishedRun:
    record = RunRecord([CaseResult(TEST, Status.PASS)], [TEST], [TEST], [], [])
    return FinishedRun(record, None, None, [], dict, TerminalLayout(root=tmp_path))


def test_a_named_report_is_a_plugin_of_the_run_until_it_ends(pytester: pytest.Pytester) -> None:
    config = pytester.parseconfigure("--compile-accuracy-report", "report.json")
    json_report = config.pluginmanager.get_plugin("torchcompile-json-report")
    assert isinstance(json_report, JsonReport)
    assert Path(json_report.path) == pytester.path / "report.json"
    assert config.pluginmanager.get_plugin("torchcompile-html-report") is None
    config._ensure_unconfigure()
    assert config.pluginmanager.get_plugin("torchcompile-json-report") is None


def test_the_hook_writes_the_files_in_the_order_the_run_names_them(
    pytester: pytest.Pytester, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    summary = tmp_path / "summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    config = pytester.parseconfigure(
        "--compile-accuracy-html", str(tmp_path / "r.html"),
        "--compile-accuracy-report", str(tmp_path / "r.json"),
    )  # fmt: skip
    plugins = config.pluginmanager.get_plugins()
    assert {type(plugin) for plugin in plugins} >= {JsonReport, HtmlReport, GithubSummary}
    run = finished(tmp_path)
    by_hook = hook_writing(config)(run)
    in_turn = writing(report_files(tmp_path / "r.json", tmp_path / "r.html", str(summary)))(run)
    assert [written.lines for written in by_hook] == [written.lines for written in in_turn]
    assert [written.lines for written in by_hook] == [
        [f"JSON report written to {tmp_path / 'r.json'}"],
        [f"HTML report written to {tmp_path / 'r.html'}"],
        [],
    ]
    assert TEST in summary.read_text()


def test_a_file_that_cannot_be_written_says_so_and_keeps_none_of_the_others_from_it(
    tmp_path: Path,
) -> None:
    html, blocking = tmp_path / "r.html", tmp_path / "a file"
    blocking.write_text("")
    written = writing(report_files(blocking / "r.json", html))(finished(tmp_path))
    assert (
        written[0].failure == f"cannot write the JSON report {blocking / 'r.json'}: Not a directory"
    )
    assert written[1].failure is None and html.is_file()
