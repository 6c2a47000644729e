"""This process's part in the run's minify phase: its queue, its identity there, its heartbeat,
and the judging children it started for its cases."""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from pytest_torchcompile.common.roles import Role, role_of
from pytest_torchcompile.common.run_state import RunState
from pytest_torchcompile.minifying.queue import (
    FINISHED,
    Heartbeat,
    Identity,
    WorkQueue,
    write_record,
)

QUEUE_DIR = ".queue"
STALE_RUN_S = 24 * 3600.0
KEEP_QUEUE_KEY = pytest.StashKey[bool]()
"""Set True here (by a conftest's ``pytest_configure``), a run leaves its queue in place at its
end, its jobs' attempts and timings to read: a seam for tests and benchmarks."""

if TYPE_CHECKING:
    from pytest_torchcompile.judging.isolation.parent import SpareChildren


@dataclass
class Coordinator:
    """This process's part in the run's minify phase."""

    config: pytest.Config
    state: RunState
    run_id: str
    queue_dir: Path
    worker: str | None
    device: str | None = None
    queue: WorkQueue | None = None
    me: Identity | None = None
    heartbeat: Heartbeat | None = None
    interrupted: bool = False
    spares: SpareChildren | None = None
    """Judging children started for this process's cases while its tests run."""
    job_devices: dict[str, str | None] = field(default_factory=dict)
    """By repro path, the device a case is minified on where it is not :attr:`device`: that of
    the confirming child handed over for it."""
    created: list[Path] = field(default_factory=list)
    """The directories above the queue that this run created (at configure), outermost first."""

    @property
    def role(self) -> Role:
        return role_of(self.config)

    def open_queue(self) -> WorkQueue:
        if self.queue is None:
            self.queue = WorkQueue(self.queue_dir, within=self.state.repro_root)
            if self.role is not Role.WORKER:  # once the queue's directories are known to be real
                _prune_runs(self.queue_dir.parent, keep=self.queue_dir.name)
            run_file = self.queue_dir / "run.json"
            if not run_file.exists() and self.role is not Role.WORKER:
                write_record(
                    run_file,
                    {
                        "run": self.run_id,
                        "created": time.time(),
                        "pid": os.getpid(),
                        "host": socket.gethostname(),
                    },
                )
        return self.queue

    def join(self, state: str) -> None:
        queue = self.open_queue()
        if self.me is None:
            self.me = Identity(
                self.worker or ("controller" if self.role is Role.CONTROLLER else "main"),
                self.device,
            )
            queue.register(self.me, state)
            self.heartbeat = Heartbeat(queue, self.me).start()
        else:
            queue.register(self.me, state)

    def flush(self) -> None:
        """Queue the cases this process found since the last flush."""
        jobs = self.state.take_minify_jobs()
        if not jobs:
            return
        queue = self.open_queue()
        for job in jobs:
            queue.enqueue(job, self.worker or "main")

    def close(self) -> None:
        if self.spares is not None:
            self.spares.close()

    def leave(self) -> None:
        if self.me is not None and self.queue is not None:
            self.queue.register(self.me, FINISHED)
        if self.heartbeat is not None:
            self.heartbeat.stop()
            self.heartbeat = None

    def remove_queue(self) -> None:
        """Remove the run's queue at its end (the controller or single process, once every
        process is done with it), and the directories that opening it created: a run leaves
        only its repros and reports behind, and a run that runs no test leaves nothing."""
        if self.role is Role.WORKER or self.config.stash.get(KEEP_QUEUE_KEY, False):
            return
        if self.queue is not None:
            shutil.rmtree(self.queue_dir, ignore_errors=True)
        for directory in reversed(self.created):
            with contextlib.suppress(OSError):  # not empty: the run wrote something else there
                directory.rmdir()


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
