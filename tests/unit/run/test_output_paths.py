"""The paths a run or a merge writes: none may be a path it reads, nor two of them one path (real
paths compared), refused before anything runs in one line naming both settings; and what a writer
killed between its write and its rename leaves is removed by the next write of that file."""

from __future__ import annotations

import multiprocessing
import os
import threading
from pathlib import Path
from typing import Any

import pytest

from pytest_torchcompile.__main__ import main
from pytest_torchcompile.common.files import atomic_write
from pytest_torchcompile.common.results import CaseResult
from pytest_torchcompile.common.settings import CheckSettings, GatingSettings
from pytest_torchcompile.common.verdict import Status
from pytest_torchcompile.reporting.json_report import write_json_report
from pytest_torchcompile.run.conclusion import RunRecord
from pytest_torchcompile.run.session import AccuracySession, test_inputs

TEST = "tests/test_a.py::test_a"


def configured(
    tmp_path: Path,
    report: Path | None = None,
    baseline: Path | None = None,
    update: bool = False,
    junit: Path | None = None,
) -> None:
    made = AccuracySession(True, tmp_path / "repros", CheckSettings(), lambda: {})
    made.configure_gating(GatingSettings(baseline, update, False, report), junit=junit)


@pytest.fixture
def baseline(tmp_path: Path) -> Path:
    path = tmp_path / "same.txt"
    path.write_text(f"{TEST}\tpass\n")
    return path


def test_a_report_at_the_baseline_is_refused_in_one_line(tmp_path: Path, baseline: Path) -> None:
    with pytest.raises(pytest.UsageError) as refused:
        configured(tmp_path, report=baseline, baseline=baseline)
    assert str(refused.value) == (
        "compile accuracy: --compile-accuracy-baseline and --compile-accuracy-report name one "
        f"path, for an input and an output: {baseline}"
    )
    assert baseline.read_text() == f"{TEST}\tpass\n"


def test_a_link_to_the_baseline_is_the_baseline(tmp_path: Path, baseline: Path) -> None:
    link = tmp_path / "link.xml"
    link.symlink_to(baseline)
    with pytest.raises(pytest.UsageError, match="--compile-accuracy-baseline and --junitxml"):
        configured(tmp_path, baseline=baseline, update=True, junit=link)


@pytest.mark.parametrize("where", ["junit", "summary", "repro dir"])
def test_two_outputs_at_one_path_are_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    report = tmp_path / ("repros" if where == "repro dir" else "out")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(report) if where == "summary" else "")
    other = {"junit": "--junitxml", "summary": "$GITHUB_STEP_SUMMARY"}.get(
        where, "--compile-accuracy-dir"
    )
    with pytest.raises(pytest.UsageError) as refused:
        configured(tmp_path, report=report, junit=report if where == "junit" else None)
    assert str(refused.value) == (
        f"compile accuracy: --compile-accuracy-report and {other} name one path, for two "
        f"outputs: {report}"
    )


def test_outputs_through_one_device_and_an_updated_baseline_are_no_clash(
    tmp_path: Path, baseline: Path
) -> None:
    configured(tmp_path, report=Path("/dev/null"), junit=Path("/dev/null"))
    configured(tmp_path, baseline=baseline, update=True, report=tmp_path / "report.json")


@pytest.mark.parametrize(
    "arguments",
    [
        ["--baseline", "{baseline}", "--junit", "{baseline}"],
        ["--report", "{shard}"],
        ["--report", "{out}", "--junit", "{out}"],
        ["--report", "{out}", "--html", "{out}"],
        ["--baseline", "{baseline}", "--update-baseline", "--github-summary", "{baseline}"],
    ],
)
def test_merge_refuses_an_output_at_an_input_or_another_output(
    tmp_path: Path, baseline: Path, arguments: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    shard = tmp_path / "shard.json"
    record = RunRecord([], [TEST], [TEST], [], []).to_json()
    write_json_report(shard, [CaseResult(TEST, Status.PASS)], None, {}, record)
    shard_bytes = shard.read_bytes()
    paths = {"baseline": baseline, "shard": shard, "out": tmp_path / "out"}
    given = [argument.format(**paths) for argument in arguments]

    with pytest.raises(SystemExit) as stopped:
        main(["merge", str(shard), *given])

    assert stopped.value.code == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert "name one path" in line, line
    assert (baseline.read_text(), shard.read_bytes()) == (f"{TEST}\tpass\n", shard_bytes)
    assert not paths["out"].exists()


# --- a writer killed between its write and its rename ---------------------------------------------


def _stopped_before_rename(path: str, reached: Any) -> None:
    """Write ``path`` and stop where the temporary file would be renamed onto it, until killed."""

    def stop(*args: Any) -> None:
        reached.set()
        threading.Event().wait()

    os.replace = stop  # type: ignore[assignment]
    atomic_write(Path(path), b"killed")


def _temporaries(directory: Path) -> list[str]:
    return sorted(path.name for path in directory.iterdir() if path.name.endswith(".tmp"))


def test_the_next_write_removes_what_a_killed_writer_left_and_no_live_ones(tmp_path: Path) -> None:
    path = tmp_path / "baseline.txt"
    path.write_bytes(b"old")
    context = multiprocessing.get_context("spawn")
    writers = []
    for _ in range(2):
        reached = context.Event()
        writer = context.Process(target=_stopped_before_rename, args=(str(path), reached))
        writer.start()
        writers.append(writer)
        assert reached.wait(120)
    killed, live = writers
    try:
        killed.kill()
        killed.join()
        assert len(_temporaries(tmp_path)) == 2

        atomic_write(path, b"new")

        assert path.read_bytes() == b"new"
        (left,) = _temporaries(tmp_path)
        assert f"-{live.pid}-" in left, "a live writer's temporary file is its own"
    finally:
        live.kill()
        live.join()


def test_the_html_report_at_another_output_is_refused(tmp_path: Path) -> None:
    report = tmp_path / "out"
    made = AccuracySession(True, tmp_path / "repros", CheckSettings(), lambda: {})
    with pytest.raises(pytest.UsageError) as refused:
        made.configure_gating(GatingSettings(None, False, False, report, html=report))
    assert str(refused.value) == (
        "compile accuracy: --compile-accuracy-report and --compile-accuracy-html name one path, "
        f"for two outputs: {report}"
    )


# --- the files the tests are read from: known once they are collected ---------------------------


@pytest.fixture
def suite(tmp_path: Path) -> Path:
    """A suite's root: a conftest.py at the root and in ``tests/``, none in ``tests/deep/``."""
    root = tmp_path / "suite"
    (root / "tests" / "deep").mkdir(parents=True)
    for path in ["conftest.py", "tests/conftest.py", "tests/test_a.py", "tests/deep/test_b.py"]:
        (root / path).write_text("# the suite's\n")
    (tmp_path / "conftest.py").write_text("# above the root\n")
    return root


def test_the_files_of_the_tests_are_their_files_and_the_conftests_up_to_the_root(
    suite: Path,
) -> None:
    assert test_inputs(
        suite, ["tests/test_a.py::test_a", "tests/deep/test_b.py::T::test[x::y]"]
    ) == [
        ("a test file", suite / "tests" / "deep" / "test_b.py"),
        ("a test file", suite / "tests" / "test_a.py"),
        ("a conftest.py", suite / "conftest.py"),
        ("a conftest.py", suite / "tests" / "conftest.py"),
    ]


@pytest.mark.parametrize("output", ["tests/test_a.py", "tests/conftest.py"])
def test_a_report_at_a_file_of_the_tests_collected_is_refused_and_nothing_written(
    suite: Path, output: str
) -> None:
    made = AccuracySession(True, suite / "repros", CheckSettings(), lambda: {})
    made.configure_gating(GatingSettings(None, False, False, suite / output))
    with pytest.raises(pytest.UsageError) as refused:
        made.refuse_outputs_at_tests(suite, ["tests/test_a.py::test_a"])
    named = "a test file" if output.endswith("test_a.py") else "a conftest.py"
    assert str(refused.value) == (
        f"compile accuracy: {named} and --compile-accuracy-report name one path, for an input "
        f"and an output: {suite / output}"
    )
    made.record(CaseResult(TEST, Status.PASS))
    assert made.end_run(set()).lines == []
    assert (suite / output).read_text() == "# the suite's\n"


def test_the_ini_file_is_an_input_of_the_run(tmp_path: Path) -> None:
    ini = tmp_path / "pyproject.toml"
    ini.write_text("[tool.pytest.ini_options]\n")
    made = AccuracySession(True, tmp_path / "repros", CheckSettings(), lambda: {})
    with pytest.raises(pytest.UsageError, match=r"^compile accuracy: the ini file and --junitxml"):
        made.configure_gating(
            GatingSettings(None, False, False, None), junit=ini, inputs=[("the ini file", ini)]
        )


def test_merge_refuses_an_output_at_the_ini_file_or_a_file_of_the_reports_tests(
    suite: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(suite)
    (suite / "tox.ini").write_text("[pytest]\n")
    shard = suite / "shard.json"
    record = RunRecord([], ["tests/test_a.py::test_a"], ["tests/test_a.py::test_a"], [], [])
    write_json_report(
        shard, [CaseResult("tests/test_a.py::test_a", Status.PASS)], None, {}, record.to_json()
    )

    with pytest.raises(SystemExit) as stopped:
        main(["merge", str(shard), "--junit", "tox.ini"])
    assert stopped.value.code == 2
    assert "the ini file and --junit name one path, for an input and an output: tox.ini" in (
        capsys.readouterr().err
    )

    for output, named in [("tests/test_a.py", "a test file"), ("conftest.py", "a conftest.py")]:
        assert main(["merge", str(shard), "--html", output]) == 4
        assert capsys.readouterr().err == (
            f"merge refused: {named} and --html name one path, for an input and an output: "
            f"{output}\n"
        )
    assert {path.read_text() for path in suite.rglob("*.py")} == {"# the suite's\n"}
    assert (suite / "tox.ini").read_text() == "[pytest]\n"
