"""The minify phase's work queue: the jobs, participants and slots of one run in files, shared
by all the processes of the run (xdist workers, or the single process). Torch-free.

A queue lives in ``<repro dir>/.queue/<run id>/``; ``queue.lock`` (a filelock) guards every
state change.

``workers/<token>.json``
    one per participating process: worker id, pid (and its start time), host, and its state
    ``testing`` -> ``minifying`` -> ``finished``. The file's mtime is the process's heartbeat,
    refreshed by a background thread.
``jobs/<case id>.json``
    one per failing case, queued as soon as its test has finished: ``pending`` -> ``running``
    (with its owner's token) -> ``done`` or ``failed``. A job whose owner died goes back to
    ``pending``; one that took its owner down twice is ``crashed``, its unminified repro kept.
``slots/<i>.lock``
    ``--compile-accuracy-minify-workers N``: a process holds one of N slot locks while it minifies.

A process whose own tests are done claims jobs, largest first, until none is pending or running
and no live process is still running tests. An owner is dead when its pid is gone (same host) or
its heartbeat is older than the lease; a process that lost its lease drops its result.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import re
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import filelock

from pytest_torchcompile.common import options
from pytest_torchcompile.common.files import (
    NotARegularFile,
    TooLarge,
    atomic_write,
    make_directory,
    read_bounded,
)
from pytest_torchcompile.common.processes import own_start, pid_alive
from pytest_torchcompile.common.results import (
    MinifyResult,
    StopReason,
)
from pytest_torchcompile.common.run_state import MinifyJob

MAX_CRASHES = 2

PENDING, RUNNING, DONE, FAILED, CRASHED = "pending", "running", "done", "failed", "crashed"
TESTING, MINIFYING, FINISHED = "testing", "minifying", "finished"


@dataclass(frozen=True)
class Identity:
    """One participating process. Make it in the process it describes."""

    worker: str
    device: str | None = None
    token: str = field(default_factory=lambda: uuid.uuid4().hex)
    pid: int = field(default_factory=os.getpid)
    pid_start: str | None = field(default_factory=own_start)
    host: str = field(default_factory=socket.gethostname)


# --- the queue -----------------------------------------------------------------------------


WORKER_FIELDS = ("worker", "token", "pid", "host", "state")
JOB_FIELDS = (
    *("id", "case_id", "nodeid", "repro_path", "timeout_s", "ops", "created", "state", "owner"),
    *("owner_worker", "attempts", "crashes", "result", "error", "started", "finished"),
)
"""The fields of a participant's and a job's record that the queue reads: a ``*.json`` without
them is none of its records."""
MAX_RECORD_BYTES = 64 * 2**20


def write_record(path: Path, data: dict[str, Any]) -> None:
    # Within its own directory: a link at a record is replaced, never written through.
    atomic_write(path, json.dumps(data, indent=1, sort_keys=True).encode(), within=path.parent)


def _ops_of(repro_path: str) -> int | None:
    """The op count a repro's header states (``# ops: N``)."""
    with contextlib.suppress(OSError), open(repro_path) as stream:
        for line in stream:
            if not line.startswith("#"):
                break
            match = re.match(r"#\s*ops:\s*(\d+)", line)
            if match:
                return int(match.group(1))
    return None


class Slot:
    """One of the N minify slots, held until :meth:`release`."""

    def __init__(self, lock: filelock.BaseFileLock | None) -> None:
        self._lock = lock

    def release(self) -> None:
        if self._lock is not None:
            self._lock.release()
            self._lock = None


class WorkQueue:
    """The jobs, participants and slots of one run, in ``directory``."""

    def __init__(
        self,
        directory: Path,
        lease_s: float | None = None,
        poll_s: float = 0.2,
        within: Path | None = None,
    ) -> None:
        """``within``: the repro directory; the queue's directories below it must be real ones
        (a symbolic link there is refused, not followed)."""
        self.directory = Path(directory)
        self.lease_s = options.lease_s() if lease_s is None else lease_s
        self.beat_s = max(0.05, min(2.0, self.lease_s / 5))
        self.poll_s = poll_s
        self.jobs_dir = self.directory / "jobs"
        self.workers_dir = self.directory / "workers"
        self.slots_dir = self.directory / "slots"
        for path in (self.jobs_dir, self.workers_dir, self.slots_dir):
            make_directory(path, within)
        self._lock = filelock.FileLock(str(self.directory / "queue.lock"))
        self.skipped: dict[Path, str] = {}
        """The ``*.json`` files in the queue that are none of its records, and why: each is left
        out of the queue (and said once, at the end of the phase), never a crash of the run."""

    def _read(self, path: Path, fields: tuple[str, ...]) -> dict[str, Any] | None:
        """The record at ``path``; None where it is gone, or is no record of this queue (noted
        in :attr:`skipped`)."""
        try:
            data = json.loads(read_bounded(path, MAX_RECORD_BYTES))
        except FileNotFoundError:
            return None
        except NotARegularFile:
            why = "not a regular file"
        except TooLarge:
            why = f"larger than {MAX_RECORD_BYTES // 2**20} MiB"
        except (OSError, ValueError, RecursionError) as error:
            why = f"not JSON ({type(error).__name__})"
        else:
            missing = [name for name in fields if not isinstance(data, dict) or name not in data]
            if not missing:
                return data
            why = "not a record of the queue" + (
                f" (no {', '.join(missing)})" if isinstance(data, dict) else ""
            )
        self.skipped.setdefault(path, why)
        return None

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        with self._lock:
            yield

    # participants

    def _worker_path(self, token: str) -> Path:
        return self.workers_dir / f"{token}.json"

    def register(self, me: Identity, state: str) -> None:
        """Announce ``me`` in ``state`` (also the first heartbeat)."""
        with self.locked():
            write_record(
                self._worker_path(me.token),
                {**dataclasses.asdict(me), "state": state, "since": time.time()},
            )

    def heartbeat(self, me: Identity) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.utime(self._worker_path(me.token))

    def alive(self, token: str | None, now: float | None = None) -> bool:
        """A participant lives while its pid runs (same host) and its heartbeat is fresh."""
        if token is None:
            return False
        path = self._worker_path(token)
        try:
            beat = path.stat().st_mtime
        except FileNotFoundError:
            return False
        record = self._read(path, WORKER_FIELDS)
        if record is None:
            return False
        if record["host"] == socket.gethostname() and not pid_alive(
            record["pid"], record.get("pid_start")
        ):
            return False
        return (time.time() if now is None else now) - beat <= self.lease_s

    def participants(self) -> list[dict[str, Any]]:
        records = (
            self._read(path, WORKER_FIELDS) for path in sorted(self.workers_dir.glob("*.json"))
        )
        return [record for record in records if record is not None]

    def minifiers(self) -> int:
        """How many live processes minify, or will once their tests are done."""
        return sum(
            1
            for p in self.participants()
            if p["state"] in (TESTING, MINIFYING) and self.alive(p["token"])
        )

    # jobs

    def _job_path(self, job_id: str) -> Path:
        return self.jobs_dir / f"{job_id}.json"

    def enqueue(self, job: MinifyJob, found_by: str) -> bool:
        """Queue ``job`` once (False when a job of that case exists)."""
        path = self._job_path(job.case_id)
        record = {
            "id": job.case_id,
            "case_id": job.case_id,
            "nodeid": job.nodeid,
            "repro_path": job.repro_path,
            "timeout_s": job.timeout_s,
            "ops": _ops_of(job.repro_path),
            "found_by": found_by,
            "created": time.time(),
            "state": PENDING,
            "owner": None,
            "owner_worker": None,
            "attempts": [],
            "crashes": 0,
            "result": None,
            "error": None,
            "started": None,
            "finished": None,
        }
        with self.locked():
            if path.exists():
                return False
            write_record(path, record)
        return True

    def jobs(self) -> list[dict[str, Any]]:
        records = [self._read(path, JOB_FIELDS) for path in self.jobs_dir.glob("*.json")]
        return sorted((r for r in records if r is not None), key=lambda r: (r["created"], r["id"]))

    def _reap(self, jobs: list[dict[str, Any]]) -> None:
        """Take running jobs back from dead owners (call under the lock)."""
        now = time.time()
        for job in jobs:
            if job["state"] != RUNNING or self.alive(job["owner"], now):
                continue
            job["crashes"] += 1
            job["attempts"][-1].update(ended=now, outcome="owner died")
            job["state"] = CRASHED if job["crashes"] >= MAX_CRASHES else PENDING
            job["owner"] = job["owner_worker"] = None
            if job["state"] == CRASHED:
                job["finished"] = now
                job["error"] = f"the process minifying it died {job['crashes']} times"
            write_record(self._job_path(job["id"]), job)

    def census(self, me: Identity) -> tuple[int, int, int]:
        """(pending jobs, running jobs, other live processes still running tests)."""
        with self.locked():
            jobs = self.jobs()
            self._reap(jobs)
            testing = sum(
                1
                for p in self.participants()
                if p["state"] == TESTING and p["token"] != me.token and self.alive(p["token"])
            )
        return (
            sum(j["state"] == PENDING for j in jobs),
            sum(j["state"] == RUNNING for j in jobs),
            testing,
        )

    def claim(self, me: Identity) -> dict[str, Any] | None:
        """Take the largest pending job, or None."""
        with self.locked():
            jobs = self.jobs()
            self._reap(jobs)
            pending = [j for j in jobs if j["state"] == PENDING]
            if not pending:
                return None
            job = min(pending, key=lambda j: (-(j["ops"] or 0), j["created"], j["id"]))
            now = time.time()
            job.update(state=RUNNING, owner=me.token, owner_worker=me.worker)
            job["started"] = job["started"] or now
            job["attempts"].append(
                {
                    "worker": me.worker,
                    "token": me.token,
                    "pid": me.pid,
                    "host": me.host,
                    "device": me.device,
                    "claimed": now,
                    "ended": None,
                    "outcome": None,
                }
            )
            write_record(self._job_path(job["id"]), job)
            return job

    def finish(
        self, me: Identity, job_id: str, result: MinifyResult | None, error: str | None = None
    ) -> bool:
        """Store the outcome of a job ``me`` holds; False (nothing stored) when ``me`` lost it."""
        with self.locked():
            job = self._read(self._job_path(job_id), JOB_FIELDS)
            if job is None or job["state"] != RUNNING or job["owner"] != me.token:
                return False
            now = time.time()
            job.update(
                state=DONE if error is None else FAILED,
                owner=None,
                finished=now,
                error=error,
                result=dataclasses.asdict(result) if result is not None else None,
            )
            job["attempts"][-1].update(ended=now, outcome=job["state"])
            write_record(self._job_path(job_id), job)
            return True

    # slots

    def acquire_slot(self, cap: int) -> Slot | None:
        """One of ``cap`` slots without waiting, or None when all are taken (cap <= 0: no cap)."""
        if cap <= 0:
            return Slot(None)
        for index in range(cap):
            lock = filelock.FileLock(str(self.slots_dir / f"{index}.lock"), thread_local=False)
            try:
                lock.acquire(blocking=False)
            except filelock.Timeout:
                continue
            return Slot(lock)
        return None


class Heartbeat:
    """Refreshes a participant's heartbeat from a daemon thread."""

    def __init__(self, queue: WorkQueue, me: Identity) -> None:
        self._queue, self._me = queue, me
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=self._run, name="pytest-torchcompile-heartbeat", daemon=True
        )

    def _run(self) -> None:
        while not self._stop.wait(self._queue.beat_s):
            self._queue.heartbeat(self._me)

    def start(self) -> Heartbeat:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()


def drain(
    queue: WorkQueue, me: Identity, run_job: Callable[[dict[str, Any]], MinifyResult], cap: int = 0
) -> list[str]:
    """Claim and run jobs until none is pending or running and no other live process is still
    running tests. Returns the ids of the jobs whose result this process stored."""
    finished: list[str] = []
    while True:
        pending, running, testing = queue.census(me)
        if not pending:
            if not running and not testing:
                return finished
            time.sleep(queue.poll_s)
            continue
        slot = queue.acquire_slot(cap)
        if slot is None:
            time.sleep(queue.poll_s)
            continue
        try:
            job = queue.claim(me)
            if job is None:
                continue
            result: MinifyResult | None = None
            error: str | None = None
            try:
                result = run_job(job)
            except Exception as exc:
                error = f"{type(exc).__name__}: {exc}"
            if queue.finish(me, job["id"], result, error):
                finished.append(job["id"])
        finally:
            slot.release()


def phase_seconds(queue_dir: Path) -> float | None:
    """Wall time of a run's minify phase: first claim to last finish, from the job files."""
    jobs = WorkQueue(queue_dir).jobs()
    starts = [a["claimed"] for j in jobs for a in j["attempts"]]
    ends = [j["finished"] for j in jobs if j["finished"] is not None]
    return max(ends) - min(starts) if starts and ends else None


def job_result(job: dict[str, Any]) -> MinifyResult:
    """What the controller records for a finished job; a failed or crashed one gets a
    placeholder that names the kept, unminified repro."""
    if job["state"] == DONE and job["result"] is not None:
        return MinifyResult(**job["result"])
    ops = job.get("ops") or 0
    seconds = (job["finished"] or time.time()) - (job["started"] or job["created"])
    kept = f"unminified repro kept: {job['repro_path']}"
    if job["state"] == CRASHED:
        stop, note = StopReason.CRASHED, f"the minifying worker died {job['crashes']} times; {kept}"
    elif job["state"] == FAILED:
        stop, note = StopReason.CRASHED, f"minifying raised {job['error']}; {kept}"
    else:
        stop, note = StopReason.INTERRUPTED, f"minify: interrupted; {kept}"
    return MinifyResult(
        ops_before=ops, ops_after=ops, seconds=seconds, compiles=0, stop=stop, path=None, note=note
    )
