"""``python -m pytest_torchcompile``: its verbs on a repro directory."""

from __future__ import annotations

import contextlib
import fnmatch
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pytest_torchcompile.cli import VERBS, main
from pytest_torchcompile.common.processes import pid_alive


@pytest.fixture
def repro_dir(tmp_path: Path) -> Path:
    """Two cases: one whose compiler bug is still there, one whose graph now compiles right."""
    import torch
    from torch.fx.experimental.proxy_tensor import make_fx

    from pytest_torchcompile.judging.case import ReproCase
    from pytest_torchcompile.repros.repro import write_repro

    inputs = [torch.randn(16)]
    graph = make_fx(lambda x: (torch.relu(x) * 2,))(*inputs)
    bug = "torch._inductor.config.cpp.inject_relu_bug_TESTING_ONLY = 'accuracy'"
    for name, config in (("tests_m.py__test_bug", bug), ("tests_m.py__test_fixed", "")):
        (tmp_path / name).mkdir()
        write_repro(
            ReproCase(
                graph,
                inputs,
                "accuracy",
                f"tests/m.py::{name[12:]} :: graph 0 (inference)",
                config_source=config,
                status_line="fail_accuracy: 1 of 1 outputs deviate",
            ),
            tmp_path / name / "repro.py",
        )
    return tmp_path


def test_without_a_verb_the_usage_names_every_verb(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 2
    shown = capsys.readouterr().out
    assert shown.startswith("usage: pytest-torchcompile")
    assert all(f"    {verb.name} " in shown for verb in VERBS)


def test_python_m_runs_the_command_line() -> None:
    run = subprocess.run(
        [sys.executable, "-m", "pytest_torchcompile"], capture_output=True, text=True, timeout=60
    )
    assert run.returncode == 2 and "rerun" in run.stdout and "report" in run.stdout


@pytest.mark.parametrize("verb", [verb.name for verb in VERBS])
def test_every_verb_has_help_with_examples(verb: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        main([verb, "--help"])
    assert done.value.code == 0
    shown = capsys.readouterr().out
    assert f"\nexamples:\n  pytest-torchcompile {verb}" in shown


def test_list_shows_each_case_with_its_status(
    repro_dir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("COLUMNS", "200")  # the directory's path whole (test_list_fits_80_columns)
    assert main(["list", str(repro_dir)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines == [
        "tests_m.py__test_bug  fail_accuracy  (2 ops)",
        "  tests/m.py::test_bug :: graph 0 (inference)",
        "tests_m.py__test_fixed  fail_accuracy  (2 ops)",
        "  tests/m.py::test_fixed :: graph 0 (inference)",
        f"2 case(s) in {repro_dir}",
    ]


def test_rerun_runs_every_repro_and_sums_up_in_its_exit_status(
    repro_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["rerun", str(repro_dir)]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert lines == [
        f"reproduced: {repro_dir / 'tests_m.py__test_bug' / 'repro.py'}",
        f"fixed: {repro_dir / 'tests_m.py__test_fixed' / 'repro.py'}",
        "1 reproduced, 1 fixed",
    ]


def test_report_prints_a_bug_report_of_a_case(
    repro_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["report", str(repro_dir / "tests_m.py__test_bug")]) == 0
    shown = capsys.readouterr().out
    assert shown.startswith("# [inductor] wrong result from a 2-op graph on CPU\n")
    assert "`torch.compile` (Inductor) computes a wrong result" in shown
    assert "found by pytest-torchcompile in `tests/m.py::test_bug :: graph 0 (inference)`" in shown
    assert "torch.ops.aten.relu.default" in shown
    assert "torch._inductor.config.cpp.inject_relu_bug_TESTING_ONLY = 'accuracy'" in shown
    assert "`python repro.py`" in shown


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["list", "none"], "pytest-torchcompile list: error: no repro directory none"),
        (["report", "none"], "pytest-torchcompile report: error: no case at none"),
        (
            ["minify", "none/repro.py"],
            "pytest-torchcompile minify: error: no such repro file: none/repro.py",
        ),
    ],
)
def test_what_cannot_be_used_is_a_usage_error(
    argv: list[str],
    said: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as done:
        main(argv)
    assert done.value.code == 2
    assert capsys.readouterr().err.startswith(said)


def test_list_fits_80_columns(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A long case name and test id wrap to the terminal (``list`` read only the header)."""
    name = "tests_models_vision_backbones_test_backbones.py__test_relu_backbone_long"
    test_id = f"tests/models/vision/backbones/test_backbones.py::test_relu_backbone_{'x' * 40}"
    (tmp_path / name).mkdir()
    (tmp_path / name / "repro.py").write_text(
        f"# case:    {test_id} :: graph 0 (inference)\n# status:  fail_accuracy: 1 of 1\n"
        "# ops:     114\n"
    )
    monkeypatch.setenv("COLUMNS", "80")
    assert main(["list", str(tmp_path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert all(len(line) <= 80 for line in lines), lines
    assert lines[:2] == [name, "  fail_accuracy  (114 ops)"]
    assert lines[2].startswith("  tests/models/vision/backbones/")


NUMBER = "is not allowed; expected a finite number > 0"


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["rerun", ".", "--timeout", "nan"], f"argument --timeout: 'nan' {NUMBER}"),
        (["rerun", ".", "--timeout", "0"], f"argument --timeout: '0' {NUMBER}"),
        (
            ["minify", "repro.py", "--timeout", "-5"],
            f"argument --timeout: '-5' {NUMBER} and <= 86400",
        ),
        (
            ["minify", "repro.py", "--timeout", "9e6"],
            f"argument --timeout: '9e6' {NUMBER} and <= 86400",
        ),
        (
            ["hunt", "--minify-timeout", "9e6", "--minutes", "0.001"],
            f"argument --minify-timeout: '9e6' {NUMBER} and <= 86400",
        ),
        (
            ["minify", "repro.py", "--device", "7"],
            "argument --device: '7' is not allowed; expected cuda:N, e.g. cuda:1",
        ),
        (["hunt", "--minutes", "nan"], f"argument --minutes: 'nan' {NUMBER}"),
        (
            ["hunt", "--minify-timeout", "inf"],
            f"argument --minify-timeout: 'inf' {NUMBER} and <= 86400",
        ),
        (
            ["hunt", "--max-ops", "0"],
            "argument --max-ops: '0' is not allowed; expected an integer >= 1",
        ),
        (["hunt", "--dir", "a-file"], "argument --dir: 'a-file' is a file, not a directory"),
        (["hunt", "--known", "nowhere"], "argument --known: 'nowhere' is not a directory"),
    ],
)
def test_an_argument_it_does_not_take_is_said_in_one_line(
    argv: list[str],
    said: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a-file").write_text("")
    with pytest.raises(SystemExit) as done:
        main(argv)
    assert done.value.code == 2
    error = capsys.readouterr().err.splitlines()[-1]
    assert error == f"pytest-torchcompile {argv[0]}: error: {said}"


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (
            ["hunt", "--minutes", "1", "--inductor-config", "no.such.key=1"],
            "--inductor-config: 'no.such.key' is no key of this torch's Inductor config",
        ),
        (
            ["minify", "case/repro.py", "--device", "cuda:4096"],
            "--device cuda:4096: no such device (* CUDA visible)",
        ),
        (
            ["report", "case"],
            "case/repro.py is no repro file of pytest-torchcompile: its header states no case, "
            "status and ops",
        ),
    ],
)
def test_what_the_installed_torch_or_the_file_refuses_is_a_usage_error(
    argv: list[str],
    said: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "case").mkdir()
    (tmp_path / "case" / "repro.py").write_text("print('not a repro')\n")
    with pytest.raises(SystemExit) as done:
        main(argv)
    assert done.value.code == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert fnmatch.fnmatchcase(line, f"pytest-torchcompile {argv[0]}: error: {said}")


@pytest.mark.parametrize("argv", [["minify", "case/repro.py"], ["hunt", "--minutes", "0.001"]])
def test_a_setup_module_not_there_is_a_usage_error_before_any_judging(
    argv: list[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PYTEST_TORCHCOMPILE_SETUP", "no_such_module_xyz")
    (tmp_path / "case").mkdir()
    (tmp_path / "case" / "repro.py").write_text("print('never run')\n")
    with pytest.raises(SystemExit) as done:
        main(argv)
    assert done.value.code == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith(
        f"pytest-torchcompile {argv[0]}: error: PYTEST_TORCHCOMPILE_SETUP: "
        "'no_such_module_xyz' is not allowed (no module no_such_module_xyz can be found)"
    )


HEADER = """\
# case:    tests/m.py::test_a :: graph 0 (inference)
# status:  fail_accuracy: 1 of 1 outputs deviate
# ops:     1
"""
"""The header comments that make a file a repro of pytest-torchcompile, as ``report`` reads it."""

HANGING = (
    HEADER
    + """
import pathlib, subprocess, sys, time

started = subprocess.Popen(
    [sys.executable, "-c", "import time; time.sleep(600)"],
    stdout=subprocess.DEVNULL,
    stderr=subprocess.DEVNULL,
)
pathlib.Path("started.pid").write_text(str(started.pid))
time.sleep(600)
"""
)


def test_a_file_that_is_no_repro_is_said_so_and_neither_run_nor_fixed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for case, (repro, minified) in {
        "bug": (HEADER + "raise SystemExit(1)\n", "open('ran', 'w')\n"),
        "other": ("open('ran', 'w')\n", None),
    }.items():
        (tmp_path / case).mkdir()
        (tmp_path / case / "repro.py").write_text(repro)
        if minified is not None:
            (tmp_path / case / "minified.py").write_text(minified)
    said = "not a repro (its header states no case, status and ops)"

    assert main(["rerun", str(tmp_path), "--minified"]) == 4
    assert capsys.readouterr().out.splitlines() == [
        f"{said}: {tmp_path / 'bug' / 'minified.py'}",
        f"{said}: {tmp_path / 'other' / 'repro.py'}",
        "2 not a repro",
    ]
    assert main(["rerun", str(tmp_path)]) == 1
    assert capsys.readouterr().out.splitlines() == [
        f"reproduced: {tmp_path / 'bug' / 'repro.py'}",
        f"{said}: {tmp_path / 'other' / 'repro.py'}",
        "1 reproduced, 1 not a repro",
    ]
    assert not list(tmp_path.glob("*/ran"))


def test_a_repro_past_its_timeout_is_said_to_and_ends_with_what_it_started(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "case").mkdir()
    (tmp_path / "case" / "repro.py").write_text(HANGING)
    assert main(["rerun", str(tmp_path), "--timeout", "4"]) == 3
    assert capsys.readouterr().out.splitlines() == [
        f"cannot run (timed out after 4 s): {tmp_path / 'case' / 'repro.py'}",
        "1 cannot run",
    ]
    started = int((tmp_path / "case" / "started.pid").read_text())
    try:
        # SIGKILL went to the repro's whole session; wait for its delivery, not for a time.
        for _ in range(100):
            if not pid_alive(started):
                break
            time.sleep(0.1)
        assert not pid_alive(started)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(started, signal.SIGKILL)
