"""What is read away from this machine (a repro's header, and so its bug report; the JSON, JUnit,
HTML reports and the GitHub step summary a CI uploads) names paths under the rootdir relative to
it and the home directory as ``~``; the JSON report's path fields stay absolute, for tools."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from pytest_torchcompile.common.results import CaseResult, MinifyResult, StopReason
from pytest_torchcompile.common.settings import CheckSettings
from pytest_torchcompile.common.verdict import Status
from pytest_torchcompile.reporting.baseline import Gate
from pytest_torchcompile.reporting.layout import TerminalLayout
from pytest_torchcompile.run.conclusion import RunRecord, conclude_run
from pytest_torchcompile.run.report_files import report_files, writing
from pytest_torchcompile.run.session import AccuracySession


def test_no_absolute_path_of_the_machine_is_made_public(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "alice"))
    root = tmp_path / "alice" / "project"
    label = f"t.py::t :: graph 0 from {root}/tests/t.py:3 (t); helper {tmp_path}/alice/lib/m.py:9"

    shown = TerminalLayout(root=root).public(label)

    assert shown == "t.py::t :: graph 0 from tests/t.py:3 (t); helper ~/lib/m.py:9"


TEST = "tests/test_m.py::test_bad"


def test_the_reports_name_no_absolute_path_but_in_the_json_reports_path_fields(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "alice"))
    root = tmp_path / "alice" / "project"
    case = root / ".compile-accuracy" / "tests_test_m.py__test_bad"
    baseline = root / "baseline.txt"
    baseline.parent.mkdir(parents=True)
    baseline.write_text(f"{TEST}\tfail_accuracy\n")
    check = CaseResult(
        TEST,
        Status.FAIL_ACCURACY,
        f"1 of 1 outputs of {root}/tests/test_m.py:6 deviate",
        case_id=case.name,
        repro_path=str(case / "repro.py"),
        graph=f"graph 0 (forward) from {root}/tests/test_m.py:6 (test_bad)",
        unchecked=[f"graph 1 (forward) from {tmp_path}/alice/lib/m.py:9 (helper): random ops"],
        minify=MinifyResult(
            4,
            4,
            1.0,
            0,
            StopReason.CRASHED,
            note=f"minifying raised OSError; unminified repro kept: {case / 'repro.py'}",
        ),
    )
    report, summary, junit, html = (
        tmp_path / name for name in ["report.json", "summary.md", "junit.xml", "report.html"]
    )
    record = RunRecord([check], [TEST], [TEST], [], [])

    conclude_run(
        record,
        Gate.load(baseline),
        writing(report_files(report, html, str(summary), junit)),
        dict,
        TerminalLayout(root=root),
    )

    for path in [summary, html]:
        assert str(tmp_path) not in path.read_text(), path
    properties = ET.parse(junit).getroot().iter("property")
    assert [p.get("value") for p in properties if str(tmp_path) in p.get("value", "")] == [
        str(case / "repro.py")
    ]
    skipped = next(ET.parse(junit).getroot().iter("skipped"))
    assert skipped.get("message") == (
        "compile accuracy expected failure: still fail_accuracy, as the baseline records "
        "(baseline baseline.txt:1); repro: .compile-accuracy/tests_test_m.py__test_bad/repro.py"
    )
    (checked,) = json.loads(report.read_text())["tests"][0]["checks"]
    assert checked["repro_path"] == str(case / "repro.py")
    assert checked["message"] == "1 of 1 outputs of tests/test_m.py:6 deviate"
    assert checked["graph"] == "graph 0 (forward) from tests/test_m.py:6 (test_bad)"
    assert checked["unchecked"] == ["graph 1 (forward) from ~/lib/m.py:9 (helper): random ops"]
    assert checked["minify"]["note"] == (
        "minifying raised OSError; unminified repro kept: "
        ".compile-accuracy/tests_test_m.py__test_bad/repro.py"
    )


def test_a_tests_junit_properties_keep_its_files_absolute_and_name_other_paths_relative(
    tmp_path: Path, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    """pytest's JUnit file, as the merged one: the properties of a test's plain graphs, which the
    session puts on the test as it ends."""
    monkeypatch.setattr(request.node, "user_properties", [])
    root, nodeid = request.config.rootpath, request.node.nodeid
    repro = root / ".compile-accuracy" / "case" / "repro.py"
    check = CaseResult(
        nodeid,
        Status.PASS,
        repro_path=str(repro),
        graphs_judged=1,
        unchecked=[f"graph 1 (forward) from {root}/tests/m.py:9 (helper): random ops"],
    )
    session = AccuracySession(True, tmp_path, CheckSettings(), lambda: {})
    session.record(check)
    report = pytest.TestReport(nodeid, ("t.py", 1, "t"), {}, "passed", None, "call")

    session.annotate_report(request.node, report, None)

    properties = dict(request.node.user_properties)
    assert properties["torchcompile_repro"] == str(repro)
    assert properties["torchcompile_unchecked"] == (
        "graph 1 (forward) from tests/m.py:9 (helper): random ops"
    )
