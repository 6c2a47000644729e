"""The minify phase: every failing case's repro is reduced once the tests have run, by all the
processes of the run at once (xdist workers, or the single process without xdist).

A work queue lives in ``<repro dir>/.queue/<run id>/``; ``queue.lock`` (a filelock) guards every
state change. The controller, or the single process, makes the run id and hands it to xdist
workers through ``workerinput``, so jobs of an earlier or concurrent run in the same directory are
never seen.

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
its heartbeat is older than the lease; a process that lost its lease drops its result. The
controller reads the results back from the job files, records them in its AccuracySession and
prints the summary lines once; workers print none of it.

GPUs: with G CUDA devices visible, worker ``gwK`` runs its tests and its minification on device
``K mod G``. ``--compile-accuracy-devices 0,2`` (or ``PYTEST_TORCHCOMPILE_DEVICES=0,2``) picks the devices;
a single process uses the first listed one, or the current device when none is listed.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import importlib
import importlib.util
import json
import os
import re
import shutil
import socket
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import filelock
import pytest

from pytest_torchcompile.run import budget
from pytest_torchcompile.run.files import atomic_write
from pytest_torchcompile.run.report import TerminalLayout
from pytest_torchcompile.run.results import (
    MinifyProgress,
    MinifyResult,
    ProgressThrottle,
    StopReason,
)
from pytest_torchcompile.run.roles import Role, role_of
from pytest_torchcompile.run.session import AccuracySession, MinifyJob

MINIFIER_ENV = "PYTEST_TORCHCOMPILE_MINIFIER"
"""``module:function`` or ``/path/file.py:function`` called instead of ``minify.minify_repro``
(same signature); a seam for tests and experiments."""
DEVICES_ENV = "PYTEST_TORCHCOMPILE_DEVICES"
LEASE_ENV = "PYTEST_TORCHCOMPILE_LEASE_S"
RUN_KEY = "pytest_torchcompile_run"
QUEUE_KEY = "pytest_torchcompile_queue"
QUEUE_DIR = ".queue"
DEFAULT_LEASE_S = 30.0
MAX_CRASHES = 2
STALE_RUN_S = 24 * 3600.0

PENDING, RUNNING, DONE, FAILED, CRASHED = "pending", "running", "done", "failed", "crashed"
TESTING, MINIFYING, FINISHED = "testing", "minifying", "finished"

Minifier = Callable[..., MinifyResult]


# --- processes -----------------------------------------------------------------------------


def _proc_stat(pid: int) -> tuple[str, str] | None:
    """(state letter, start time) of a process, from /proc; None when it has no entry."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2:].split()
    return fields[0], fields[19]


def _has_proc() -> bool:
    return sys.platform.startswith("linux") and Path("/proc/self/stat").exists()


def pid_alive(pid: int, start: str | None = None) -> bool:
    """Whether ``pid`` runs on this host and is the process that started at ``start`` (a zombie,
    a dead process whose parent has not reaped it yet, counts as dead)."""
    if _has_proc():
        stat = _proc_stat(pid)
        if stat is None or stat[0] in ("Z", "X"):
            return False
        return start is None or stat[1] == start
    if os.name == "nt":  # os.kill(pid, 0) would send CTRL_C_EVENT there: rely on the lease
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _own_start() -> str | None:
    stat = _proc_stat(os.getpid()) if _has_proc() else None
    return stat[1] if stat else None


@dataclass(frozen=True)
class Identity:
    """One participating process. Make it in the process it describes."""

    worker: str
    device: str | None = None
    token: str = field(default_factory=lambda: uuid.uuid4().hex)
    pid: int = field(default_factory=os.getpid)
    pid_start: str | None = field(default_factory=_own_start)
    host: str = field(default_factory=socket.gethostname)


# --- the queue -----------------------------------------------------------------------------


def _read(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return None
    return data if isinstance(data, dict) else None


def _write(path: Path, data: dict[str, Any]) -> None:
    atomic_write(path, json.dumps(data, indent=1, sort_keys=True).encode())


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

    def __init__(self, directory: Path, lease_s: float | None = None, poll_s: float = 0.2) -> None:
        self.directory = Path(directory)
        self.lease_s = float(os.environ.get(LEASE_ENV, DEFAULT_LEASE_S)) if lease_s is None else lease_s
        self.beat_s = max(0.05, min(2.0, self.lease_s / 5))
        self.poll_s = poll_s
        self.jobs_dir = self.directory / "jobs"
        self.workers_dir = self.directory / "workers"
        self.slots_dir = self.directory / "slots"
        for path in (self.jobs_dir, self.workers_dir, self.slots_dir):
            path.mkdir(parents=True, exist_ok=True)
        self._lock = filelock.FileLock(str(self.directory / "queue.lock"))

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
            _write(self._worker_path(me.token), {**dataclasses.asdict(me), "state": state, "since": time.time()})

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
        record = _read(path)
        if record is None:
            return False
        if record["host"] == socket.gethostname() and not pid_alive(record["pid"], record.get("pid_start")):
            return False
        return (time.time() if now is None else now) - beat <= self.lease_s

    def participants(self) -> list[dict[str, Any]]:
        records = (_read(path) for path in sorted(self.workers_dir.glob("*.json")))
        return [record for record in records if record is not None]

    def minifiers(self) -> int:
        """How many live processes minify, or will once their tests are done."""
        return sum(1 for p in self.participants() if p["state"] in (TESTING, MINIFYING) and self.alive(p["token"]))

    # jobs

    def _job_path(self, job_id: str) -> Path:
        return self.jobs_dir / f"{job_id}.json"

    def enqueue(self, job: MinifyJob, found_by: str) -> bool:
        """Queue ``job`` once (False when a job of that case exists)."""
        path = self._job_path(job.case_id)
        record = {
            "id": job.case_id, "case_id": job.case_id, "nodeid": job.nodeid, "repro_path": job.repro_path,
            "timeout_s": job.timeout_s, "ops": _ops_of(job.repro_path), "found_by": found_by,
            "created": time.time(), "state": PENDING, "owner": None, "owner_worker": None,
            "attempts": [], "crashes": 0, "result": None, "error": None, "started": None, "finished": None,
        }
        with self.locked():
            if path.exists():
                return False
            _write(path, record)
        return True

    def jobs(self) -> list[dict[str, Any]]:
        records = [_read(path) for path in self.jobs_dir.glob("*.json")]
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
            _write(self._job_path(job["id"]), job)

    def census(self, me: Identity) -> tuple[int, int, int]:
        """(pending jobs, running jobs, other live processes still running tests)."""
        with self.locked():
            jobs = self.jobs()
            self._reap(jobs)
            testing = sum(1 for p in self.participants()
                          if p["state"] == TESTING and p["token"] != me.token and self.alive(p["token"]))
        return (sum(j["state"] == PENDING for j in jobs), sum(j["state"] == RUNNING for j in jobs), testing)

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
            job["attempts"].append({"worker": me.worker, "token": me.token, "pid": me.pid, "host": me.host,
                                    "device": me.device, "claimed": now, "ended": None, "outcome": None})
            _write(self._job_path(job["id"]), job)
            return job

    def finish(self, me: Identity, job_id: str, result: MinifyResult | None, error: str | None = None) -> bool:
        """Store the outcome of a job ``me`` holds; False (nothing stored) when ``me`` lost it."""
        with self.locked():
            job = _read(self._job_path(job_id))
            if job is None or job["state"] != RUNNING or job["owner"] != me.token:
                return False
            now = time.time()
            job.update(state=DONE if error is None else FAILED, owner=None, finished=now, error=error,
                       result=dataclasses.asdict(result) if result is not None else None)
            job["attempts"][-1].update(ended=now, outcome=job["state"])
            _write(self._job_path(job_id), job)
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
        self._thread = threading.Thread(target=self._run, name="pytest-torchcompile-heartbeat", daemon=True)

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


def drain(queue: WorkQueue, me: Identity, run_job: Callable[[dict[str, Any]], MinifyResult],
          cap: int = 0) -> list[str]:
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
        stop, note = StopReason.INTERRUPTED, f"repro: {job['repro_path']}"
    return MinifyResult(ops_before=ops, ops_after=ops, seconds=seconds, compiles=0, stop=stop, path=None, note=note)


# --- devices -------------------------------------------------------------------------------


def parse_devices(text: str) -> list[int]:
    try:
        return [int(part) for part in text.replace(" ", "").split(",") if part]
    except ValueError:
        raise pytest.UsageError(f"--compile-accuracy-devices / {DEVICES_ENV}: expected CUDA device indices "
                                f"like '0,1', got {text!r}") from None


def device_index(worker_id: str | None, listed: list[int], count: int) -> int | None:
    """The CUDA device a process works on: ``gwK`` gets entry ``K mod G`` of the listed devices
    (all visible ones when none are listed); a single process gets the first listed device, or
    None (the current device) when none are listed. None without CUDA devices."""
    if count <= 0:
        return None
    devices = listed or list(range(count))
    match = re.fullmatch(r"gw(\d+)", worker_id or "")
    if match is None:
        return devices[0] if listed else None
    return devices[int(match.group(1)) % len(devices)]


# --- pytest side ---------------------------------------------------------------------------


def _option(config: pytest.Config, name: str) -> Any:
    from pytest_torchcompile.run import settings

    return settings.option_value(config, next(o for o in settings.OPTIONS if o.name == name))


def load_minifier(state: AccuracySession) -> Minifier:
    if state.devices_lost_in is not None:
        from pytest_torchcompile.minifying.search import minify_in_fresh_process

        return minify_in_fresh_process
    spec = os.environ.get(MINIFIER_ENV, "")
    if not spec:
        from pytest_torchcompile.minifying.search import minify_repro

        return minify_repro
    target, _, name = spec.rpartition(":")
    if target.endswith(".py"):
        module_spec = importlib.util.spec_from_file_location(f"_pytest_torchcompile_minifier_{os.getpid()}", target)
        if module_spec is None or module_spec.loader is None:
            raise pytest.UsageError(f"{MINIFIER_ENV}: cannot import {target}")
        module = importlib.util.module_from_spec(module_spec)
        module_spec.loader.exec_module(module)
    else:
        module = importlib.import_module(target)
    minifier: Minifier = getattr(module, name)
    return minifier


@dataclass
class Coordinator:
    """This process's part in the run's minify phase."""

    config: pytest.Config
    state: AccuracySession
    run_id: str
    queue_dir: Path
    worker: str | None
    device: str | None = None
    queue: WorkQueue | None = None
    me: Identity | None = None
    heartbeat: Heartbeat | None = None
    interrupted: bool = False
    finished_here: list[str] = field(default_factory=list)

    @property
    def role(self) -> Role:
        return role_of(self.config)

    def open_queue(self) -> WorkQueue:
        if self.queue is None:
            if self.role is not Role.WORKER:
                _prune_runs(self.queue_dir.parent, keep=self.queue_dir.name)
            self.queue = WorkQueue(self.queue_dir)
            run_file = self.queue_dir / "run.json"
            if not run_file.exists() and self.role is not Role.WORKER:
                _write(run_file, {"run": self.run_id, "created": time.time(), "pid": os.getpid(),
                                  "host": socket.gethostname()})
        return self.queue

    def join(self, state: str) -> None:
        queue = self.open_queue()
        if self.me is None:
            self.me = Identity(self.worker or ("controller" if self.role is Role.CONTROLLER else "main"),
                               self.device)
            queue.register(self.me, state)
            self.heartbeat = Heartbeat(queue, self.me).start()
        else:
            queue.register(self.me, state)

    def flush(self) -> None:
        """Queue the cases this process found since the last flush."""
        if not self.state.minify_jobs:
            return
        jobs = list(self.state.minify_jobs)
        del self.state.minify_jobs[: len(jobs)]
        queue = self.open_queue()
        for job in jobs:
            queue.enqueue(job, self.worker or "main")

    def leave(self) -> None:
        if self.me is not None and self.queue is not None:
            self.queue.register(self.me, FINISHED)
        if self.heartbeat is not None:
            self.heartbeat.stop()
            self.heartbeat = None


COORDINATOR_KEY = pytest.StashKey[Coordinator]()


def _prune_runs(root: Path, keep: str) -> None:
    """Remove the queues of runs older than a day."""
    if not root.is_dir():
        return
    now = time.time()
    for run in root.iterdir():
        if run.name == keep or not run.is_dir():
            continue
        try:
            age = now - (run / "run.json").stat().st_mtime
        except FileNotFoundError:
            age = now - run.stat().st_mtime
        if age > STALE_RUN_S:
            shutil.rmtree(run, ignore_errors=True)


class ParallelHooks:
    """Hooks of the minify phase that every process needs."""

    def __init__(self, coordinator: Coordinator) -> None:
        self.coordinator = coordinator

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        if self.coordinator.role is Role.CONTROLLER:
            self.coordinator.open_queue()
        else:
            self.coordinator.join(TESTING)

    def pytest_runtest_logfinish(self) -> None:
        self.coordinator.flush()

    def pytest_keyboard_interrupt(self) -> None:
        self.coordinator.interrupted = True


class XdistHooks:
    """Hooks that exist only with pytest-xdist (registered only when it is active)."""

    def __init__(self, coordinator: Coordinator) -> None:
        self.coordinator = coordinator

    def pytest_configure_node(self, node: Any) -> None:
        node.workerinput[RUN_KEY] = self.coordinator.run_id
        node.workerinput[QUEUE_KEY] = str(self.coordinator.queue_dir)


def configure(config: pytest.Config, state: AccuracySession) -> None:
    """Set up this process's part of the minify phase (from ``pytest_configure``)."""
    if not state.enabled:
        return
    workerinput = getattr(config, "workerinput", None)
    if workerinput is not None and RUN_KEY in workerinput:
        run_id, queue_dir = workerinput[RUN_KEY], Path(workerinput[QUEUE_KEY])
        worker: str | None = str(workerinput.get("workerid", "gw0"))
    else:
        run_id = f"{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        queue_dir, worker = state.repro_root / QUEUE_DIR / run_id, None
    coordinator = Coordinator(config, state, run_id, queue_dir, worker)
    coordinator.device = _select_device(config, worker)
    budget.configure(config, _limit_this_process)
    if coordinator.role is Role.SINGLE and not os.environ.get(MINIFIER_ENV):
        state.on_minify_job = functools.partial(_prestart_judge, state, coordinator.device)
    config.stash[COORDINATOR_KEY] = coordinator
    config.pluginmanager.register(ParallelHooks(coordinator), "torchcompile-parallel")
    if config.pluginmanager.hasplugin("xdist"):
        config.pluginmanager.register(XdistHooks(coordinator), "torchcompile-parallel-xdist")


def _limit_this_process(threads: int) -> None:
    # Imported only where the threads are limited: a process that keeps torch's defaults (an
    # xdist controller) does not import torch for the plugin.
    from pytest_torchcompile.torch_internals.compat import limit_this_process

    limit_this_process(threads)


def _prestart_judge(state: AccuracySession, device: str | None, job: MinifyJob) -> None:
    """A single process minifies its cases itself once its tests are done: start the judging
    child of the first case now, while the tests go on (the minify phase adopts it)."""
    from pytest_torchcompile.judging.isolation import prestart
    from pytest_torchcompile.repros.repro import config_lines

    if state.devices_lost_in is None:
        prestart(config_lines(Path(job.repro_path)), device)


def _select_device(config: pytest.Config, worker: str | None) -> str | None:
    listed = parse_devices(str(_option(config, "compile-accuracy-devices") or os.environ.get(DEVICES_ENV, "")))
    if worker is None and not listed:
        return None  # see device_index; asked without torch, which an xdist controller need not import
    import torch

    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    index = device_index(worker, listed, count)
    if index is None:
        return None
    torch.cuda.set_device(index)
    return f"cuda:{index}"


def _progress_writer(config: pytest.Config, coordinator: Coordinator, nodeid: str) -> Callable[[MinifyProgress], None]:
    """Shows the progress of one job: in place on the terminal of a single process or the
    controller; as an occasional line on the (shared) stderr of a worker, when it is a terminal."""
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    due = ProgressThrottle()

    def on_terminal(progress: MinifyProgress) -> None:
        if reporter is not None and reporter.isatty:
            reporter.rewrite(f"minifying {nodeid}: {progress.describe()}", erase=True)

    def on_stderr(progress: MinifyProgress) -> None:
        if sys.stderr.isatty() and due():
            sys.stderr.write(f"[{coordinator.worker}] minifying {nodeid}: {progress.describe()}\n")
            sys.stderr.flush()

    return on_stderr if coordinator.role is Role.WORKER else on_terminal


def run_minify_phase(config: pytest.Config, state: AccuracySession) -> None:
    """From ``pytest_sessionfinish``: take part in the minify phase; the controller (or the single
    process) then records every job's result and prints the summary lines."""
    coordinator = config.stash.get(COORDINATOR_KEY, None)
    if coordinator is None:  # configure() did not run: minify here, one case after the other
        _run_in_process(config, state)
        return
    coordinator.flush()
    if coordinator.interrupted:
        coordinator.leave()
        return
    minifiers: list[Minifier] = []
    cap = int(_option(config, "compile-accuracy-minify-workers") or 0)

    def run_job(job: dict[str, Any]) -> MinifyResult:
        assert coordinator.queue is not None and coordinator.me is not None
        if not minifiers:
            minifiers.append(load_minifier(state))
        progress = _progress_writer(config, coordinator, job["nodeid"])
        # CPU users: the jobs under way or waiting, and the processes still running tests
        pending, running, testing = coordinator.queue.census(coordinator.me)
        at_once = min(coordinator.queue.minifiers(), pending + running + testing)
        with budget.children_limited(budget.for_minifying(config, min(at_once, cap) if cap > 0 else at_once)):
            return minifiers[0](Path(job["repro_path"]), timeout_s=job["timeout_s"], progress=progress,
                                device=coordinator.device)

    try:
        coordinator.join(MINIFYING)
        assert coordinator.queue is not None and coordinator.me is not None
        coordinator.finished_here += drain(coordinator.queue, coordinator.me, run_job, cap)
    finally:
        coordinator.leave()
    if coordinator.role is Role.WORKER:
        config.workeroutput["pytest_torchcompile_minified"] = list(coordinator.finished_here)  # type: ignore[attr-defined]
        return
    report(config, state, coordinator.queue)


def _run_in_process(config: pytest.Config, state: AccuracySession) -> None:
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    jobs, minifier = list(state.minify_jobs), load_minifier(state) if state.minify_jobs else None
    state.minify_jobs.clear()
    for job in jobs:
        assert minifier is not None
        result = minifier(Path(job.repro_path), timeout_s=job.timeout_s)
        state.record_minified(job.case_id, result)
        if reporter is not None:
            reporter.write_line(TerminalLayout.of(config).fit(result.summary_line(job.nodeid)))


def report(config: pytest.Config, state: AccuracySession, queue: WorkQueue) -> None:
    """Record every job's result in ``state`` and print one line per job."""
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    jobs = queue.jobs()
    if reporter is not None and jobs:
        if reporter.isatty:
            reporter.rewrite("", erase=True)
        if getattr(reporter._tw, "width_of_current_line", 0):
            reporter.write("\n")  # the progress dots' line is still open during sessionfinish
    for job in jobs:
        result = job_result(job)
        state.record_minified(job["case_id"], result)
        if reporter is not None:
            reporter.write_line(TerminalLayout.of(config).fit(result.summary_line(job["nodeid"])))
