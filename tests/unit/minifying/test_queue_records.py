"""The minify queue's files read back: a ``*.json`` in its directories that is none of its
records (a foreign file, a corrupt or empty one, a directory, a pipe) is left out and noted,
never a crash of the run; and its records are replaced whole wherever the queue lives, a
directory under ``/dev`` (``/dev/shm``) included."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from pytest_torchcompile.common.run_state import MinifyJob
from pytest_torchcompile.minifying.queue import PENDING, TESTING, Identity, WorkQueue


@pytest.fixture
def queue(tmp_path: Path) -> WorkQueue:
    return WorkQueue(tmp_path / "queue", lease_s=30.0)


def foreign(directory: Path, name: str, kind: str) -> Path:
    path = directory / name
    if kind == "directory":
        path.mkdir()
    elif kind == "pipe":
        os.mkfifo(path)
    else:
        path.write_bytes(
            {
                "two documents": b'{"a": 1}\n{"a": 2}\n',
                "empty": b"",
                "not utf-8": b"\xff\xfe{",
                "a list": b"[1, 2]",
                "another object": b'{"a": 1}',
            }[kind]
        )
    return path


KINDS = ["two documents", "empty", "not utf-8", "a list", "another object", "directory", "pipe"]


@pytest.mark.parametrize("kind", KINDS)
def test_a_file_in_the_queue_that_is_no_record_is_left_out_and_noted(
    queue: WorkQueue, tmp_path: Path, kind: str
) -> None:
    me = Identity("main")
    queue.register(me, TESTING)
    queue.enqueue(
        MinifyJob("case-a", "tests/t.py::test_a", str(tmp_path / "repro.py"), 1.0), "main"
    )
    worker = foreign(queue.workers_dir, "planted.json", kind)
    job = foreign(queue.jobs_dir, "planted.json", kind)

    assert [record["token"] for record in queue.participants()] == [me.token]
    assert queue.minifiers() == 1
    assert [record["id"] for record in queue.jobs()] == ["case-a"]
    assert queue.census(Identity("other")) == (1, 0, 1)
    assert not queue.alive("planted")
    assert set(queue.skipped) == {worker, job}
    assert all(why for why in queue.skipped.values())
    assert queue.jobs()[0]["state"] == PENDING


def test_what_is_noted_says_why_in_words(queue: WorkQueue) -> None:
    foreign(queue.workers_dir, "a.json", "two documents")
    foreign(queue.workers_dir, "b.json", "another object")
    foreign(queue.workers_dir, "c.json", "pipe")
    queue.participants()
    assert {path.name: why for path, why in queue.skipped.items()} == {
        "a.json": "not JSON (JSONDecodeError)",
        "b.json": "not a record of the queue (no worker, token, pid, host, state)",
        "c.json": "not a regular file",
    }


@pytest.fixture
def under_dev() -> Iterator[Path]:
    """A directory under /dev that holds regular files (a tmpfs, as CI runners' /dev/shm)."""
    if not os.path.isdir("/dev/shm") or not os.access("/dev/shm", os.W_OK):
        pytest.skip("no writable /dev/shm")
    with tempfile.TemporaryDirectory(dir="/dev/shm") as directory:
        yield Path(directory)


def test_a_queue_under_dev_replaces_its_records_whole(under_dev: Path) -> None:
    queue = WorkQueue(under_dev / "queue", lease_s=30.0)
    me = Identity("main")
    queue.register(me, TESTING)
    queue.register(me, "finished")
    assert [record["state"] for record in queue.participants()] == ["finished"]
    assert queue.skipped == {}
