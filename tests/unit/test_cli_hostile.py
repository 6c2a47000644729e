"""The command line given what no run of the plugin writes: a pipe, a directory or a file of
another encoding where a case's files belong, a file that is no repro, a name without ``.py``.
Each is said in one line, with a non-zero exit status where it is refused: never a traceback, a
hang, or a file of anyone's run."""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from pytest_torchcompile.cli import main

HEADER = b"""\
# case:    tests/m.py::test_a :: graph 0 (inference)
# status:  fail_accuracy: 1 of 1 outputs deviate
# ops:     1
"""
"""A repro's header comments, as ``list``, ``rerun`` and ``report`` read them."""

NOT_REGULAR = "not a repro (it is not a regular file)"


@contextlib.contextmanager
def answering_pipe(path: Path) -> Iterator[None]:
    """A named pipe at ``path`` whose writer, once a reader opens it, writes a repro's header:
    a reader that opens the pipe gets a repro rather than hanging, so that it fails its test."""
    os.mkfifo(path)

    def write() -> None:
        # Whoever opened the pipe may have closed it before the header was written.
        with contextlib.suppress(BrokenPipeError), open(path, "wb", buffering=0) as pipe:
            pipe.write(HEADER + b"raise SystemExit(0)\n")

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    try:
        yield
    finally:
        # A reader of its own lets the writer through where nothing opened the pipe.
        reader = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        writer.join()
        os.close(reader)


def test_list_says_a_case_file_that_is_no_regular_file_is_no_repro_and_never_opens_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    for case in ("bug", "directory", "pipe"):
        (tmp_path / case).mkdir()
    (tmp_path / "bug" / "repro.py").write_bytes(HEADER)
    (tmp_path / "directory" / "repro.py").mkdir()
    with (
        answering_pipe(tmp_path / "pipe" / "repro.py"),
        answering_pipe(tmp_path / "bug" / "minified.py"),
    ):
        assert main(["list", str(tmp_path)]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "bug  fail_accuracy  (1 ops; minified.py not a repro: it is not a regular file)",
        "  tests/m.py::test_a :: graph 0 (inference)",
        f"directory  {NOT_REGULAR}",
        f"pipe  {NOT_REGULAR}",
        f"1 case(s) in {tmp_path}, 2 not a repro",
    ]


def test_list_says_a_header_that_is_not_utf8_is_no_repro(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    for case, header in (("latin1", HEADER.replace(b"1 of 1", b"\xe9t\xe9")), ("bug", HEADER)):
        (tmp_path / case).mkdir()
        (tmp_path / case / "repro.py").write_bytes(header)
    (tmp_path / "bug" / "minified.py").write_bytes(b"# case:    \xff\n")
    assert main(["list", str(tmp_path)]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "bug  fail_accuracy  (1 ops; minified.py not a repro: its header is not UTF-8 text)",
        "  tests/m.py::test_a :: graph 0 (inference)",
        "latin1  not a repro (its header is not UTF-8 text)",
        f"1 case(s) in {tmp_path}, 1 not a repro",
    ]


@pytest.mark.parametrize("minified", [False, True], ids=["repro", "minified"])
def test_rerun_runs_no_pipe(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], minified: bool
) -> None:
    (tmp_path / "case").mkdir()
    (tmp_path / "case" / "repro.py").write_bytes(HEADER + b"raise SystemExit(1)\n")
    pipe = tmp_path / "case" / ("minified.py" if minified else "repro.py")
    pipe.unlink(missing_ok=True)
    argv = ["rerun", str(tmp_path), "--timeout", "30", *(["--minified"] if minified else [])]
    with answering_pipe(pipe):
        assert main(argv) == 4
    assert capsys.readouterr().out.splitlines() == [f"{NOT_REGULAR}: {pipe}", "1 not a repro"]


@pytest.mark.parametrize(
    ("name", "content", "said"),
    [
        (
            "repro.py",
            None,
            "{case}/repro.py is no repro file of pytest-torchcompile: it is not a regular file",
        ),
        (
            "repro.py",
            b"# case:    \xff\n",
            "{case}/repro.py is no repro file of pytest-torchcompile: its header is not UTF-8 text",
        ),
        ("bug_report.md", None, "{case}: bug_report.md cannot be read: it is not a regular file"),
        ("bug_report.md", b"\xff", "{case}: bug_report.md cannot be read: it is not UTF-8 text"),
        ("repro.py", HEADER + b"\xff\n", "{case}: repro.py cannot be read: it is not UTF-8 text"),
    ],
    ids=["pipe", "latin1-header", "pipe-bug-report", "latin1-bug-report", "latin1-body"],
)
def test_report_refuses_a_case_file_it_cannot_read_in_one_line(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    name: str,
    content: bytes | None,
    said: str,
) -> None:
    case = tmp_path / "case"
    case.mkdir()
    (case / "repro.py").write_bytes(HEADER)
    target = case / name
    with contextlib.ExitStack() as stack:
        if content is None:
            target.unlink(missing_ok=True)
            stack.enter_context(answering_pipe(target))
        else:
            target.write_bytes(content)
        with pytest.raises(SystemExit) as done:
            main(["report", str(case)])
    assert done.value.code == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line == f"pytest-torchcompile report: error: {said.format(case=case)}"


@pytest.mark.parametrize("exists", [True, False], ids=["existing", "missing"])
def test_minify_refuses_a_name_without_py(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    exists: bool,
) -> None:
    monkeypatch.chdir(tmp_path)
    if exists:
        Path("afile").write_bytes(HEADER)
    with pytest.raises(SystemExit) as done:
        main(["minify", "afile"])
    assert done.value.code == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert (
        line
        == "pytest-torchcompile minify: error: afile is no repro file: its name does not end in .py"
    )


def test_minify_refuses_a_file_that_is_no_repro_before_it_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    Path("planted.py").write_text("open('ran', 'w').close()\n")
    with pytest.raises(SystemExit) as done:
        main(["minify", "planted.py"])
    assert done.value.code == 2
    assert not Path("ran").exists()
    (line,) = capsys.readouterr().err.splitlines()
    assert line == (
        "pytest-torchcompile minify: error: planted.py is no repro file of pytest-torchcompile: "
        "its header states no case, status and ops"
    )


def test_minify_says_a_repro_it_cannot_read_cannot_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    Path("repro.py").write_bytes(HEADER + b"\xff\n")
    assert main(["minify", "repro.py"]) == 3
    assert capsys.readouterr().out.splitlines() == [
        "not minified repro.py: the repro is broken: repro.py cannot be read: it is not UTF-8 text"
    ]


def test_hunt_says_a_known_case_that_is_a_pipe_and_reads_past_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    known = tmp_path / "known"
    (known / "case").mkdir(parents=True)
    pipe = known / "case" / "minified.py"
    argv = ["hunt", "--minutes", "0.001", "--dir", str(tmp_path / "hunt"), "--known", str(known)]
    with answering_pipe(pipe):
        assert main(argv) == 0
    assert f"--known: {NOT_REGULAR}: {pipe}" in capsys.readouterr().err.splitlines()
