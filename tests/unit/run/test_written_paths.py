"""Paths the user names for the files a run writes (the JSON report, the baseline, JUnit) that are
not regular files, or not writable: a device or a pipe is written through, never replaced; a
directory, a socket or a read-only file is refused in one line; a baseline that is no regular
file of sane size is refused in one line."""

from __future__ import annotations

import json
import os
import socket
import stat
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from pytest_torchcompile.__main__ import main
from pytest_torchcompile.common.files import RefusedPath, atomic_write
from pytest_torchcompile.common.results import CaseResult
from pytest_torchcompile.common.settings import CheckSettings, GatingSettings
from pytest_torchcompile.common.verdict import Status
from pytest_torchcompile.reporting import baseline_file
from pytest_torchcompile.reporting.baseline_file import BaselineError, load_baseline
from pytest_torchcompile.run import shard_report
from pytest_torchcompile.run.merge import REFUSED
from pytest_torchcompile.run.session import AccuracySession

needs_dev_full = pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full")
TEST = "tests/test_a.py::test_a"


def session(
    tmp_path: Path, report: Path | None = None, baseline: Path | None = None, update: bool = False
) -> AccuracySession:
    made = AccuracySession(True, tmp_path / "repros", CheckSettings(), lambda: {})
    made.configure_gating(GatingSettings(baseline, update, False, report))
    made.record(CaseResult(TEST, Status.PASS))
    return made


@pytest.fixture
def fifo(tmp_path: Path) -> Path:
    path = tmp_path / "pipe"
    os.mkfifo(path)
    return path


@pytest.fixture
def read_fifo(fifo: Path) -> Iterator[list[bytes]]:
    """What a process reading ``fifo`` received."""
    received: list[bytes] = []

    def read() -> None:
        with fifo.open("rb") as stream:
            received.append(stream.read())

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    yield received
    # The reader ends with the write; a test that wrote nothing opens the pipe to end it.
    if reader.is_alive():
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
    reader.join(10)


def entries(directory: Path) -> list[str]:
    return sorted(path.name for path in directory.iterdir())


# --- atomic_write without `within`: a path the user named --------------------------------------


def test_a_pipe_with_a_reader_is_written_through_and_stays_a_pipe(
    fifo: Path, read_fifo: list[bytes]
) -> None:
    for _ in range(100):  # until the reader has opened its end
        try:
            atomic_write(fifo, b"{}\n")
            break
        except RefusedPath:
            threading.Event().wait(0.05)
    else:
        pytest.fail("the reader never opened the pipe")
    threading.Event().wait(0.2)
    assert read_fifo == [b"{}\n"]
    assert stat.S_ISFIFO(fifo.lstat().st_mode)
    assert entries(fifo.parent) == ["pipe"]


def test_a_pipe_no_process_reads_is_refused_not_waited_on(fifo: Path) -> None:
    with pytest.raises(RefusedPath, match=r"^it is a pipe that no process reads$"):
        atomic_write(fifo, b"{}\n")
    assert stat.S_ISFIFO(fifo.lstat().st_mode)
    assert entries(fifo.parent) == ["pipe"]


def test_a_character_device_is_written_through_never_replaced() -> None:
    before = os.stat("/dev/null")
    atomic_write("/dev/null", b"{}\n")
    after = os.stat("/dev/null")
    assert (
        stat.S_ISCHR(after.st_mode)
        and after.st_rdev == before.st_rdev
        and after.st_ino == before.st_ino
    )


@needs_dev_full
def test_a_full_device_is_a_write_error_and_stays_a_device() -> None:
    with pytest.raises(OSError, match="No space left on device"):
        atomic_write("/dev/full", b"{}\n")
    assert stat.S_ISCHR(os.stat("/dev/full").st_mode)


@pytest.mark.parametrize("kind", ["directory", "socket", "read-only file"])
def test_what_cannot_take_a_file_is_refused_and_left_as_it_is(tmp_path: Path, kind: str) -> None:
    path = tmp_path / "report.json"
    with socket.socket(socket.AF_UNIX) as bound:
        if kind == "directory":
            path.mkdir()
            why = "it is a directory"
        elif kind == "socket":
            bound.bind(str(path))
            why = "it is a socket, not a file"
        else:
            path.write_text("the user's")
            path.chmod(0o444)
            why = "it is read-only (mode 0444), so it is left as it is; make it writable to have it written"
        before = path.lstat()
        with pytest.raises(RefusedPath) as refused:
            atomic_write(path, b"{}\n")
    assert str(refused.value) == why
    assert path.lstat().st_ino == before.st_ino and path.lstat().st_mode == before.st_mode
    assert entries(tmp_path) == ["report.json"]
    if kind == "read-only file":
        assert path.read_text() == "the user's"


WRITES_TO_STDOUT = """
import sys
import tempfile
from pytest_torchcompile.common.files import atomic_write
print("before", flush=True)
atomic_write("/dev/stdout", b"{}\\n")
print("after", flush=True)
"""


def test_stdout_redirected_to_a_file_is_written_through_not_replaced(tmp_path: Path) -> None:
    output = tmp_path / "output.txt"
    with output.open("w") as stdout:
        subprocess.run(
            [sys.executable, "-c", WRITES_TO_STDOUT], stdout=stdout, check=True, timeout=120
        )
    assert output.read_text() == "before\n{}\nafter\n"
    assert entries(tmp_path) == ["output.txt"]


def test_a_link_the_user_named_stays_a_link_and_its_target_is_written(tmp_path: Path) -> None:
    target = tmp_path / "reports" / "run.json"
    target.parent.mkdir()
    target.write_text("old")
    link = tmp_path / "report.json"
    link.symlink_to(target)
    atomic_write(link, b"{}\n")
    assert link.is_symlink() and target.read_text() == "{}\n"


# --- the run's files -----------------------------------------------------------------------------


@needs_dev_full
def test_a_report_on_a_full_device_fails_the_run_in_one_line_and_the_device_stays(
    tmp_path: Path,
) -> None:
    end = session(tmp_path, report=Path("/dev/full")).end_run(set())
    assert end.failures == ["cannot write the JSON report /dev/full: No space left on device"]
    assert not any("written to /dev/full" in line for line in end.lines)
    assert stat.S_ISCHR(os.stat("/dev/full").st_mode)


def test_a_report_into_a_pipe_reaches_its_reader(
    tmp_path: Path, fifo: Path, read_fifo: list[bytes]
) -> None:
    threading.Event().wait(0.2)  # the reader opens its end
    end = session(tmp_path, report=fifo).end_run(set())
    threading.Event().wait(0.2)
    assert end.failures == []
    assert [test["nodeid"] for test in json.loads(read_fifo[0])["tests"]] == [TEST]
    assert stat.S_ISFIFO(fifo.lstat().st_mode)


def test_a_report_path_that_is_a_directory_is_refused_before_any_test(tmp_path: Path) -> None:
    with pytest.raises(pytest.UsageError) as refused:
        session(tmp_path, report=tmp_path)
    assert (
        str(refused.value)
        == f"compile accuracy: cannot write the JSON report {tmp_path}: it is a directory"
    )


def test_a_read_only_baseline_is_not_replaced_by_an_update(tmp_path: Path) -> None:
    baseline = tmp_path / "baseline.txt"
    baseline.write_text(f"{TEST}\tpass\n")
    baseline.chmod(0o444)
    with pytest.raises(
        pytest.UsageError, match=r"cannot write the baseline .*: it is read-only \(mode 0444\)"
    ):
        session(tmp_path, baseline=baseline, update=True)
    gated = session(tmp_path, baseline=baseline)  # read, not written: fine
    assert gated.end_run(set()).failures == []
    assert baseline.read_text() == f"{TEST}\tpass\n"


def test_a_baseline_write_failure_is_worded_as_one(tmp_path: Path) -> None:
    baseline = tmp_path / "baseline.txt"
    baseline.write_text(f"{TEST}\tpass\n")
    updating = session(tmp_path, baseline=baseline, update=True)
    baseline.chmod(0o444)  # after the run started
    end = updating.end_run(set())
    assert end.failures == [
        f"cannot write the baseline {baseline}: it is read-only (mode 0444), so it is left "
        "as it is; make it writable to have it written"
    ]
    assert end.heading == "the run fails"
    assert baseline.read_text() == f"{TEST}\tpass\n"


@needs_dev_full
def test_merge_refuses_to_replace_a_device_with_its_report(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from pytest_torchcompile.reporting.json_report import write_json_report
    from pytest_torchcompile.run.conclusion import RunRecord

    shard = tmp_path / "shard.json"
    write_json_report(
        shard,
        [CaseResult(TEST, Status.PASS)],
        None,
        {},
        RunRecord([], [TEST], [TEST], [], []).to_json(),
    )
    status = main(["merge", str(shard), "--report", "/dev/full"])
    out = capsys.readouterr().out
    assert status == 1, out
    assert "cannot write the JSON report /dev/full: No space left on device" in out
    assert "written to /dev/full" not in out
    assert stat.S_ISCHR(os.stat("/dev/full").st_mode)


# --- reading a baseline --------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["/dev/zero", "pipe", "directory"])
def test_a_baseline_that_is_no_regular_file_is_refused_in_one_line(
    tmp_path: Path, kind: str
) -> None:
    path = Path(kind) if kind.startswith("/") else tmp_path / kind
    if kind == "pipe":
        os.mkfifo(path)
    elif kind == "directory":
        path.mkdir()
    with pytest.raises(BaselineError) as refused:
        load_baseline(path)
    assert str(refused.value) == f"{path}: not a regular file: a baseline is a text file"


def test_a_baseline_larger_than_any_is_refused_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(baseline_file, "MAX_BYTES", 2**20)
    path = tmp_path / "baseline.txt"
    path.write_bytes(b"t.py::a\tpass\n" * (2**20 // 10))
    with pytest.raises(BaselineError) as refused:
        load_baseline(path)
    assert str(refused.value) == f"{path}: larger than 1 MiB: not a baseline file"


# --- reading a shard's report ----------------------------------------------------------------------


def _merge_refusal(
    shard: Path, merged: Path, capsys: pytest.CaptureFixture[str]
) -> tuple[int, list[str]]:
    status = main(["merge", str(shard), "--report", str(merged)])
    captured = capsys.readouterr()
    return status, [line for line in (captured.out + captured.err).splitlines() if line.strip()]


@pytest.mark.parametrize("kind", ["/dev/zero", "pipe", "directory"])
def test_a_shard_report_that_is_no_regular_file_is_refused_in_one_line(
    tmp_path: Path, kind: str, capsys: pytest.CaptureFixture[str]
) -> None:
    path = Path(kind) if kind.startswith("/") else tmp_path / kind
    if kind == "pipe":
        os.mkfifo(path)  # no writer: a read would wait for one, forever
    elif kind == "directory":
        path.mkdir()
    merged = tmp_path / "merged.json"
    status, lines = _merge_refusal(path, merged, capsys)
    assert status == REFUSED
    assert lines == [f"merge refused: {path}: not a regular file: a report is a JSON file"]
    assert not merged.exists() and sorted(tmp_path.iterdir()) == (
        [path] if kind != "/dev/zero" else []
    )


def test_a_shard_report_larger_than_any_is_refused_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(shard_report, "MAX_REPORT_BYTES", 2**20)
    shard = tmp_path / "shard.json"
    shard.write_bytes(b" " * (2**20 + 1))
    merged = tmp_path / "merged.json"
    status, lines = _merge_refusal(shard, merged, capsys)
    assert status == REFUSED
    assert lines == [f"merge refused: {shard}: larger than 1 MiB: not a report"]
    assert not merged.exists() and shard.stat().st_size == 2**20 + 1


def test_a_regular_file_under_dev_is_replaced_whole_not_appended_to() -> None:
    if not os.path.isdir("/dev/shm") or not os.access("/dev/shm", os.W_OK):
        pytest.skip("no writable /dev/shm")
    with tempfile.TemporaryDirectory(dir="/dev/shm") as directory:
        path = Path(directory, "report.json")
        path.write_text('{"old": 1}\n')
        atomic_write(path, b"{}\n")
        assert path.read_bytes() == b"{}\n"
