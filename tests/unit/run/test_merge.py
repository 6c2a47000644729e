"""Merging the JSON reports of a split run's shards (``python -m pytest_torchcompile merge``): the
union is judged as the single run of the whole suite is, and reports that do not add up to one
run are refused with one line. In process, from reports written by the report writer itself."""

from __future__ import annotations

import dataclasses
import json
import os
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from pytest_torchcompile.__main__ import main
from pytest_torchcompile.common.results import CaseResult, MinifyResult, StopReason
from pytest_torchcompile.common.verdict import Status
from pytest_torchcompile.reporting.baseline import Gate
from pytest_torchcompile.reporting.json_report import write_json_report
from pytest_torchcompile.reporting.layout import TerminalLayout
from pytest_torchcompile.run.conclusion import RunRecord, conclude_run, file_digest
from pytest_torchcompile.run.report_files import report_files, writing
from pytest_torchcompile.run.shard import Shard

ENVIRONMENT = {"torch": "2.13.0", "python": "3.11.7", "inductor_config": {}}
WIDTH = 100


def tid(name: str) -> str:
    return f"tests/test_m.py::test_{name}"


STATUSES = {
    "a": Status.PASS,
    "b": Status.FAIL_ACCURACY,
    "c": Status.FAIL_COMPILE,
    "d": Status.PASS,
    "e": Status.PASS,
    "f": Status.FAIL_ACCURACY,
}
"""The tests with a check; ``g`` has none and fails for a reason of its own; ``h`` is deselected
(``-k``) in the whole run and in every shard."""
SHARDS = {1: "ab", 2: "cdg", 3: "ef"}

BASELINE = f"""\
{tid("a")}\tpass
{tid("b")}\tpass
{tid("c")}\tfail_compile\thttps://example.org/bug/1
{tid("d")}\tfail_accuracy
{tid("f")}\tflaky
{tid("gone")}\tpass
tests/test_other.py::test_x\tpass
"""
"""b is a new failure, c an expected one, d improved, e missing, f flaky; the test of ``gone``
no longer exists; test_other.py is not part of the run."""


REPRO_PATHS = {"c": ".compile-accuracy/tests_test_m.py__test_c/repro.py"}


def checks(names: str) -> list[CaseResult]:
    return [
        CaseResult(
            tid(name),
            STATUSES[name],
            f"check of {name}",
            worst_ratio=1.5,
            case_id=f"tests_test_m.py__test_{name}" if STATUSES[name] is not Status.PASS else None,
            repro_path=REPRO_PATHS.get(name),
        )
        for name in names
        if name in STATUSES
    ]


def failed_reports(names: str, gate: Gate | None) -> list[tuple[str, str]]:
    """The failed test reports of these tests, as a run with ``gate`` counts them: the baseline
    excuses (xfails) c's expected failure and f's flaky one."""
    excused = "cf" if gate is not None else ""
    return [
        (tid(name), "call")
        for name in names
        if name == "g"
        or (name in STATUSES and STATUSES[name] is not Status.PASS and name not in excused)
    ]


ALL = "abcdefg"
COLLECTED = {tid(name) for name in ALL + "h"}


def record(names: str, gate: Gate | None, shard: Shard | None = None) -> RunRecord:
    failed = failed_reports(names, gate)
    return RunRecord(
        checks(names),
        COLLECTED,
        {tid(name) for name in names},
        set(),
        failed,
        shard,
        pytest.ExitCode.TESTS_FAILED if failed else pytest.ExitCode.OK,
        None if gate is None else file_digest(gate.path),
        # Each test with a failing check failed by it; g failed on its own.
        {nodeid for nodeid, _ in failed if nodeid != tid("g")},
    )


def write_shards(directory: Path, gate: Gate | None, shards: dict[int, str] = SHARDS) -> list[Path]:
    """Each shard's report, as the plugin writes it at the end of the shard's run."""
    paths = []
    for index, names in shards.items():
        shard_record = record(names, gate, Shard("pytest-split", index, len(SHARDS)))
        path = directory / f"shard-{index}.json"
        decisions = gate.decisions(shard_record.results) if gate is not None else None
        write_json_report(
            path, shard_record.results, decisions, ENVIRONMENT, shard_record.to_json()
        )
        paths.append(path)
    return paths


@pytest.fixture
def baseline(tmp_path: Path) -> Path:
    path = tmp_path / "baseline.txt"
    path.write_text(BASELINE)
    return path


def run_merge(
    capsys: pytest.CaptureFixture[str], *args: str | os.PathLike[str]
) -> tuple[int, list[str]]:
    status = main(["merge", *map(str, args)])
    return status, capsys.readouterr().out.splitlines()


def single_run(gate: Gate | None, report: Path | None = None) -> tuple[int, list[str]]:
    """The exit status and the lines of the run of the whole suite, as the plugin ends it:
    ``report`` written, and the baseline where ``gate`` updates it."""
    whole = record(ALL, gate)
    files = writing(report_files(report, gate=gate))
    layout = TerminalLayout(WIDTH, root=Path.cwd())
    end = conclude_run(whole, gate, files, lambda: ENVIRONMENT, layout)
    lines = end.lines + (
        ["compile accuracy: the run fails against the baseline:"] if end.failures else []
    )
    return end.exit_status(
        whole.exitstatus or 0, len(whole.failed_reports)
    ), lines + end.failure_lines


def without_files(lines: list[str]) -> list[str]:
    """The lines judging the run: not the merge's own, nor the names of the files written (with
    the indented lines a long path wraps onto)."""
    kept: list[str] = []
    leaving_out = False
    for line in lines:
        if " written to" in line or line.startswith("merged "):
            leaving_out = True
        elif not (leaving_out and line.startswith("  ")):
            leaving_out = False
            kept.append(line)
    return kept


def comparable(report_path: Path) -> dict[str, Any]:
    return json.loads(report_path.read_text())


@pytest.mark.parametrize("strict", [False, True], ids=["lenient", "strict"])
@pytest.mark.parametrize(
    "shards_had_baseline", [True, False], ids=["shards-gated", "shards-ungated"]
)
def test_the_union_of_the_shards_is_judged_as_the_whole_run(
    tmp_path: Path,
    baseline: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    strict: bool,
    shards_had_baseline: bool,
) -> None:
    monkeypatch.setenv("COLUMNS", str(WIDTH))
    gate = Gate.load(baseline, strict)
    shards = write_shards(tmp_path, gate if shards_had_baseline else None)
    expected_status, expected_lines = single_run(gate, tmp_path / "single.json")

    strictness = ["--strict"] if strict else []
    status, lines = run_merge(
        capsys, *shards, "--baseline", baseline, *strictness, "--report", tmp_path / "merged.json"
    )

    assert status == expected_status == 1
    assert without_files(lines) == without_files(expected_lines)
    assert comparable(tmp_path / "merged.json") == comparable(tmp_path / "single.json")
    said = " ".join(" ".join(lines).split())  # lines wrapped at spaces, read whole
    assert f"NEW FAILURE {tid('b')}: fail_accuracy, the baseline expects pass" in said
    assert f"IMPROVED {tid('d')}: pass, the baseline expects fail_accuracy" in said
    assert f"unknown test id {tid('gone')}" in said and "test_other" not in said
    assert ("IMPROVED tests" in said.split("the run fails against the baseline:")[1]) == strict


def test_without_a_baseline_the_failed_tests_fail_the_merge(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("COLUMNS", str(WIDTH))
    expected_status, expected_lines = single_run(None)
    status, lines = run_merge(capsys, *write_shards(tmp_path, None))
    assert status == expected_status == 1
    assert without_files(lines) == without_files(expected_lines)


def test_a_passing_union_passes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    baseline = tmp_path / "baseline.txt"
    baseline.write_text("".join(f"{tid(name)}\t{STATUSES[name]}\n" for name in "abcdef"))
    gate = Gate.load(baseline)
    shards = write_shards(tmp_path, gate, {1: "abc", 2: "def", 3: ""})
    status, lines = run_merge(capsys, *shards, "--baseline", baseline)
    assert status == 0
    assert "baseline: 3 ok, 3 expected failure" in lines


def test_update_baseline_writes_the_union_as_the_whole_run_would(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("COLUMNS", str(WIDTH))
    whole = tmp_path / "whole"
    whole.mkdir()
    (whole / "baseline.txt").write_text(BASELINE)
    expected_status, expected_lines = single_run(Gate.load(whole / "baseline.txt", update=True))
    merged = (
        tmp_path / "union" / "baseline.txt"
    )  # as long a path as the whole run's: lines wrap alike
    merged.parent.mkdir()
    merged.write_text(BASELINE)
    shards = write_shards(tmp_path, Gate.load(merged))

    status, lines = run_merge(capsys, *shards, "--baseline", merged, "--update-baseline")

    assert merged.read_text() == (whole / "baseline.txt").read_text()
    assert f"{tid('b')}\tfail_accuracy" in merged.read_text().splitlines()
    assert tid("gone") not in merged.read_text()
    # g failed for another reason: the recording run still fails, sharded or not.
    assert status == expected_status == 1
    # Paths wrap at "/": the two directories' names are as long, so they wrap alike.
    assert without_files(lines) == without_files(
        [
            line.replace(str(whole / "baseline.txt"), str(merged)).replace(
                "whole/baseline.txt", "union/baseline.txt"
            )
            for line in expected_lines
        ]
    )


def test_junit_and_github_summary_of_the_union(
    tmp_path: Path, baseline: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    shards = write_shards(tmp_path, Gate.load(baseline))
    summary = tmp_path / "summary.md"
    summary.write_text("earlier step\n")
    run_merge(
        capsys,
        *shards,
        "--baseline",
        baseline,
        "--junit",
        tmp_path / "out.xml",
        "--github-summary",
        summary,
    )

    cases = {
        case.get("name"): case for case in ET.parse(tmp_path / "out.xml").getroot().iter("testcase")
    }
    assert sorted(cases) == [f"test_{name}" for name in ALL]
    assert {
        name: [child.tag for child in case if child.tag != "properties"]
        for name, case in cases.items()
    } == {
        "test_a": [],
        "test_b": ["failure"],
        "test_c": ["skipped"],
        "test_d": [],
        "test_e": [],
        "test_f": ["skipped"],
        "test_g": ["failure"],
    }
    assert cases["test_b"].find("failure").get("message") == (  # type: ignore[union-attr]
        "failed in call; compile accuracy NEW FAILURE: fail_accuracy, the baseline expects pass"
    )
    assert cases["test_b"].get("classname") == "tests.test_m"
    # As a single run's xfail: the baseline row and the repro path.
    assert cases["test_c"].find("skipped").get("message") == (  # type: ignore[union-attr]
        "compile accuracy expected failure: still fail_compile, as the baseline records "
        f"[https://example.org/bug/1] (baseline {baseline}:3); repro: {REPRO_PATHS['c']}"
    )
    properties = {p.get("name"): p.get("value") for p in cases["test_c"].iter("property")}
    assert properties["torchcompile_status"] == "fail_compile"
    text = summary.read_text()
    assert text.startswith("earlier step\n### pytest-torchcompile")
    assert (
        "**Baseline:** 1 ok, 1 expected failure, 1 NEW FAILURE, 1 IMPROVED, 1 missing, 1 flaky"
        in text
    )


def test_a_test_in_two_shards_with_one_status_counts_once(
    tmp_path: Path,
    baseline: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    gate = Gate.load(baseline)
    shards = write_shards(tmp_path, gate, {1: "abc", 2: "cdg", 3: "ef"})
    status, lines = run_merge(
        capsys, *shards, "--baseline", baseline, "--report", tmp_path / "merged.json"
    )
    assert status == 1
    assert (
        f"{tid('c')} ran in {shards[0]} and {shards[1]}, fail_compile in both: counted once"
        in lines
    )
    report = json.loads((tmp_path / "merged.json").read_text())
    assert report["counts"]["checks"]["fail_compile"] == 1


def test_an_interrupted_shard_passes_its_exit_status_on(
    tmp_path: Path,
    baseline: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    shards = write_shards(tmp_path, Gate.load(baseline))
    edit(shards[1], lambda report: report["run"].update(exitstatus=2))
    status, lines = run_merge(capsys, *shards, "--baseline", baseline)
    assert status == pytest.ExitCode.INTERRUPTED
    assert f"WARNING {shards[1]}: its run ended with exit status 2" in lines


def edit(path: Path, change: Callable[[dict[str, Any]], object]) -> None:
    report = json.loads(path.read_text())
    change(report)
    path.write_text(json.dumps(report))


def conflicting(paths: list[Path]) -> None:
    def add_b(report: dict[str, Any]) -> None:
        other = json.loads(paths[0].read_text())
        report["tests"].append(next(test for test in other["tests"] if test["nodeid"] == tid("b")))
        report["tests"][-1]["status"] = "pass"

    edit(paths[2], add_b)


REFUSALS: dict[str, tuple[Callable[[list[Path]], object], str]] = {
    "schema": (
        lambda paths: edit(paths[1], lambda r: r.update(schema_version=2)),
        "{1}: report schema v2; this merge reads v1",
    ),
    "plugin version": (
        lambda paths: edit(paths[2], lambda r: r.update(plugin_version="0.0.1")),
        "{2}: written by pytest-torchcompile 0.0.1, {0} by ",
    ),
    "conflict": (
        conflicting,
        f"{tid('b')} is fail_accuracy in {{0}} but pass in {{2}}: the shards disagree",
    ),
    "truncated": (
        lambda paths: paths[1].write_text(paths[1].read_text()[:200]),
        "{1}: truncated or not JSON (",
    ),
    "fields cut": (
        lambda paths: edit(paths[1], lambda r: r["run"].pop("selected")),
        "{1}: truncated or malformed report (KeyError: 'selected')",
    ),
    "a ratio of text": (
        lambda paths: edit(
            paths[0], lambda r: r["tests"][0]["checks"][0].update(worst_ratio="abc")
        ),
        "{0}: malformed report: report.tests[0].checks[0].worst_ratio is 'abc', not a number",
    ),
    "a test id of a number": (
        lambda paths: edit(paths[1], lambda r: r["tests"][0].update(nodeid=12)),
        "{1}: malformed report: report.tests[0].nodeid is 12, not a string",
    ),
    "a leaf's shape of text": (
        lambda paths: edit(
            paths[0],
            lambda r: r["tests"][0]["checks"][0]["leaves"].append(
                {"path": "out", "shape": "abc", "dtype": "f", "passed": True, "rule": "r"}
            ),
        ),
        "{0}: malformed report: report.tests[0].checks[0].leaves[0].shape is 'abc', not a list",
    ),
    "an unknown status": (
        lambda paths: edit(paths[2], lambda r: r["tests"][0]["checks"][0].update(status=[1])),
        "{2}: malformed report: report.tests[0].checks[0].status is [1], not a known Status",
    ),
    "a run's list of a number": (
        lambda paths: edit(paths[1], lambda r: r["run"].update(selected=7)),
        "{1}: malformed report: report.run.selected is 7, not a list",
    ),
    "an exit status pytest has not": (
        lambda paths: edit(paths[1], lambda r: r["run"].update(exitstatus=99999)),
        "{1}: malformed report: report.run.exitstatus is 99999, not a known ExitCode",
    ),
    "counts of text": (
        lambda paths: edit(paths[1], lambda r: r.update(counts="many")),
        "{1}: malformed report: report.counts is 'many', not an object",
    ),
    "a count of text": (
        lambda paths: edit(paths[0], lambda r: r["counts"]["checks"].update(AA="1")),
        "{0}: malformed report: report.counts.checks.AA is '1', not an integer",
    ),
    "a test's status of a list": (
        lambda paths: edit(paths[2], lambda r: r["tests"][0].update(status=["pass"])),
        "{2}: malformed report: report.tests[0].status is ['pass'], not a known Status",
    ),
    "a test's status unknown": (
        lambda paths: edit(paths[2], lambda r: r["tests"][0].update(status="fine")),
        "{2}: malformed report: report.tests[0].status is 'fine', not a known Status",
    ),
    "root causes of text": (
        lambda paths: edit(paths[0], lambda r: r.update(root_causes="none")),
        "{0}: malformed report: report.root_causes is 'none', not a list",
    ),
    "nested too deep": (
        lambda paths: paths[1].write_text(
            '{"schema_version": 1, "x": ' + "[" * 100_000 + "]" * 100_000 + "}"
        ),
        "{1}: nested too deep to be a report",
    ),
    "older plugin": (
        lambda paths: edit(paths[0], lambda r: r.pop("run")),
        "{0}: the report does not say what its run selected",
    ),
    "another baseline": (
        lambda paths: (
            paths[0].with_name("baseline.txt").write_text(BASELINE + f"{tid('z')}\tpass\n")
        ),
        "{3} is not the baseline file the shards were judged against",
    ),
    "shards of two baselines": (
        lambda paths: edit(paths[1], lambda r: r["run"].update(baseline_sha256=None)),
        "{1} was judged against another baseline than {0} (or one and none)",
    ),
    "missing shard": (
        lambda paths: paths.pop(1),
        "no report of pytest-split --group 2 of --splits 3: every shard's report is needed",
    ),
    "two splits": (
        lambda paths: edit(
            paths[2],
            lambda r: r["run"].update(shard={"splitter": "pytest-shard", "index": 0, "count": 3}),
        ),
        "{2} is pytest-shard --shard-id 0 of --num-shards 3 but {0} is pytest-split --group 1 of --splits 3",
    ),
}


@pytest.mark.parametrize("case", list(REFUSALS))
def test_reports_that_do_not_make_one_run_are_refused_in_one_line(
    tmp_path: Path,
    baseline: Path,
    capsys: pytest.CaptureFixture[str],
    case: str,
) -> None:
    paths = write_shards(tmp_path, Gate.load(baseline))
    spoil, message = REFUSALS[case]
    expected = message.format(*paths, baseline)
    spoil(paths)
    before = baseline.read_text()
    status = main(
        [
            "merge",
            *map(str, paths),
            "--baseline",
            str(baseline),
            "--update-baseline",
            "--report",
            str(tmp_path / "merged.json"),
            "--junit",
            str(tmp_path / "merged.xml"),
        ]
    )
    out, err = capsys.readouterr()
    assert status == 4
    assert out == ""
    assert len(err.splitlines()) == 1 and err.startswith("merge refused: ")
    assert expected in err
    assert baseline.read_text() == before
    assert not (tmp_path / "merged.json").exists() and not (tmp_path / "merged.xml").exists()


def test_merged_repro_paths_point_into_the_merged_directory(
    tmp_path: Path,
    baseline: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    paths = write_shards(tmp_path, Gate.load(baseline))
    case = "tests_test_m.py__test_b"
    shard_root = tmp_path / "shard-1-repros"
    (shard_root / case).mkdir(parents=True)
    (shard_root / case / "repro.py").write_text("# repro\n")

    def with_repro(report: dict[str, Any]) -> None:
        (check,) = next(test for test in report["tests"] if test["nodeid"] == tid("b"))["checks"]
        shard_case = f"/home/runner/work/project/.compile-accuracy/{case}"
        check["repro_path"] = f"{shard_case}/repro.py"
        check["minify"] = dataclasses.asdict(
            MinifyResult(
                5,
                1,
                1.0,
                3,
                StopReason.MINIMAL,
                f"{shard_case}/minified.py",
                f"{shard_case}/minified_kernel.cpp",
                bug_report_path=f"{shard_case}/bug_report.md",
            )
        )

    edit(paths[0], with_repro)

    into = tmp_path / "merged-repros"
    status, lines = run_merge(
        capsys,
        *paths,
        "--baseline",
        baseline,
        "--repros",
        shard_root,
        "--into",
        into,
        "--report",
        tmp_path / "merged.json",
    )
    assert status == 1
    assert f"repros: 1 cases merged into {into}" in lines
    report = json.loads((tmp_path / "merged.json").read_text())
    (check,) = next(test for test in report["tests"] if test["nodeid"] == tid("b"))["checks"]
    assert check["repro_path"] == str(into / case / "repro.py")
    assert [check["minify"][key] for key in ("path", "kernel_path", "bug_report_path")] == [
        str(into / case / name) for name in ("minified.py", "minified_kernel.cpp", "bug_report.md")
    ]
    assert any(line.strip().startswith("bug report: ") for line in lines), lines
    assert not any("/home/runner" in line for line in lines), lines
    assert (into / case / "repro.py").read_text() == "# repro\n"


HOSTILE_PATHS = {
    "outside": "../../etc/passwd",
    "absolute": "/etc/passwd",
    "another case's": "/home/runner/.compile-accuracy/tests_test_m.py__test_x/repro.py",
    "not a case file": "/home/runner/.compile-accuracy/tests_test_m.py__test_b/evil.sh",
    "escapes": "tests_test_m.py__test_b/\x1b]8;;https://example.org\x07repro.py",
    "up and back": "/home/runner/.compile-accuracy/../../tests_test_m.py__test_b/repro.py",
}


@pytest.mark.parametrize("name", list(HOSTILE_PATHS))
def test_a_repro_path_outside_its_case_directory_is_left_out_with_a_note(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str
) -> None:
    paths = write_shards(tmp_path, None)
    hostile = HOSTILE_PATHS[name]
    case = "tests_test_m.py__test_b"

    def with_paths(report: dict[str, Any]) -> None:
        (check,) = next(test for test in report["tests"] if test["nodeid"] == tid("b"))["checks"]
        check["repro_path"] = hostile
        check["minify"] = dataclasses.asdict(
            MinifyResult(
                5,
                1,
                1.0,
                3,
                StopReason.MINIMAL,
                f"/home/runner/.compile-accuracy/{case}/minified.py",
                bug_report_path=f".compile-accuracy/{case}/bug_report.md",
            )
        )

    edit(paths[0], with_paths)
    outputs = {
        "html": tmp_path / "m.html",
        "junit": tmp_path / "m.xml",
        "report": tmp_path / "m.json",
    }
    summary = tmp_path / "summary.md"
    status, lines = run_merge(
        capsys,
        *paths,
        *(part for option, path in outputs.items() for part in (f"--{option}", path)),
        "--github-summary",
        summary,
    )

    assert status == 1
    shown = repr(hostile) if len(repr(hostile)) <= 40 else repr(hostile)[:37] + "..."
    assert (
        f"WARNING {paths[0]}: {tid('b')}: repro_path {shown} left out: not a file of its case "
        "directory"
    ) in lines
    written = [path.read_text() for path in [*outputs.values(), summary]]
    assert not any(hostile in text or "evil" in text or "\x1b" in text for text in written)
    assert not any(hostile in line or "\x1b" in line for line in lines if "WARNING" not in line)
    (check,) = next(
        t for t in json.loads(outputs["report"].read_text())["tests"] if t["nodeid"] == tid("b")
    )["checks"]
    assert check["repro_path"] is None
    assert check["minify"]["path"] == f"/home/runner/.compile-accuracy/{case}/minified.py"
    assert check["minify"]["bug_report_path"] == f".compile-accuracy/{case}/bug_report.md"


def test_shards_judged_against_a_baseline_need_it_in_the_merge(
    tmp_path: Path,
    baseline: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    status = main(["merge", *map(str, write_shards(tmp_path, Gate.load(baseline)))])
    assert status == 4
    assert capsys.readouterr().err == (
        "merge refused: the shards were judged against a baseline file: give it with --baseline FILE\n"
    )
