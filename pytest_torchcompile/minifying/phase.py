"""The minify phase: every failing case's repro is reduced once the tests have run, by all the
processes of the run at once (xdist workers, or the single process without xdist), through a
file queue (:mod:`pytest_torchcompile.minifying.queue`).

The controller, or the single process, makes the run id and hands it to xdist workers through
``workerinput``, so jobs of an earlier or concurrent run in the same directory are never seen.
The controller reads the results back from the job files, records them in its RunState
and prints the summary lines once; workers print none of it.

GPUs: with G CUDA devices visible, worker ``gwK`` runs its tests and its minification on device
``K mod G``. ``--compile-accuracy-devices 0,2`` (or ``PYTEST_TORCHCOMPILE_DEVICES=0,2``) picks the devices;
a single process uses the first listed one, or the current device when none is listed.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pytest_torchcompile.common import allowed, budget, options
from pytest_torchcompile.common.devices import device_index
from pytest_torchcompile.common.files import UnsafePath, make_directory, unusable_directory
from pytest_torchcompile.common.results import (
    MinifyProgress,
    MinifyResult,
    ProgressThrottle,
)
from pytest_torchcompile.common.roles import Role
from pytest_torchcompile.common.run_state import MinifyJob, RunState
from pytest_torchcompile.minifying.coordinator import COORDINATOR_KEY, QUEUE_DIR, Coordinator
from pytest_torchcompile.minifying.hooks import QUEUE_KEY, RUN_KEY, ParallelHooks, XdistHooks
from pytest_torchcompile.minifying.queue import MINIFYING, WorkQueue, drain, job_result
from pytest_torchcompile.reporting.layout import TerminalLayout

if TYPE_CHECKING:
    from pytest_torchcompile.judging.isolation.parent import SpareChildren

Minifier = Callable[..., MinifyResult]

MINIFIER_KEY = pytest.StashKey[Minifier]()
"""A minifier set here (by a conftest's ``pytest_configure``, in every process of the run) is
called instead of ``repro_file.minify_repro``, with its signature: a seam for tests and experiments."""


def load_minifier(
    config: pytest.Config, state: RunState, spares: SpareChildren | None = None
) -> Minifier:
    chosen = config.stash.get(MINIFIER_KEY, None)
    if chosen is not None and state.devices_lost_in is None:
        return chosen
    # Imported only where a case is minified: a run that minifies nothing does not import torch.
    from pytest_torchcompile.minifying import repro_file

    if state.devices_lost_in is not None:
        return repro_file.minify_in_fresh_process
    return (
        repro_file.minify_repro
        if spares is None
        else functools.partial(repro_file.minify_repro, spares=spares)
    )


def configure(config: pytest.Config, state: RunState) -> None:
    """Set up this process's part of the minify phase (from ``pytest_configure``)."""
    if not state.enabled:
        return
    listed = _listed_devices(config)
    # Made here to learn early that they can be written; removed at the end when nothing else is.
    created = [
        directory
        for directory in (state.repro_root, state.repro_root / QUEUE_DIR)
        if not directory.exists()
    ]
    _make_queue_root(state.repro_root)
    run_id, queue_dir, worker = _run_and_queue(config, state.repro_root)
    coordinator = Coordinator(config, state, run_id, queue_dir, worker, created=created)
    coordinator.device = _select_device(listed, worker)
    budget.configure(config, _limit_this_process)
    if coordinator.role is Role.SINGLE:
        state.on_minify_job = functools.partial(_prestart_judge, coordinator)
    config.stash[COORDINATOR_KEY] = coordinator
    config.pluginmanager.register(ParallelHooks(coordinator), "torchcompile-parallel")
    if config.pluginmanager.hasplugin("xdist"):
        config.pluginmanager.register(XdistHooks(coordinator), "torchcompile-parallel-xdist")


def _limit_this_process(threads: int) -> None:
    # Imported only where the threads are limited: a process that keeps torch's defaults (an
    # xdist controller) does not import torch for the plugin.
    from pytest_torchcompile.torch_internals.threads import limit_this_process

    limit_this_process(threads)


def _prestart_judge(coordinator: Coordinator, job: MinifyJob) -> None:
    """A single process minifies its cases itself once its tests are done: have the judging
    child of the first case ready while the tests go on (the minify phase adopts it): the child
    that confirmed the case where it has one (started, warm), else one started now."""
    # Imported only once a case is queued: a run that queues none does not import torch.
    from pytest_torchcompile.checking.runner import CheckRunner
    from pytest_torchcompile.judging.isolation.parent import SpareChildren
    from pytest_torchcompile.repros.reading import config_lines

    if coordinator.state.devices_lost_in is None and MINIFIER_KEY not in coordinator.config.stash:
        if coordinator.spares is None:
            coordinator.spares = SpareChildren()
        config_source, runner = config_lines(Path(job.repro_path)), coordinator.state.runner
        if isinstance(runner, CheckRunner):
            # With no device of its own, the process minifies a case on the GPU its confirmation
            # judged it on, where it has one: the confirming child, warm, is then the one handed
            # over, and the case is judged as it was confirmed.
            device = coordinator.device or runner.confirmer.devices.get(job.repro_path)
            if runner.confirmer.hand_over(config_source, device, coordinator.spares):
                if device != coordinator.device:
                    coordinator.job_devices[job.repro_path] = device
                return
        coordinator.spares.prestart(config_source, coordinator.device)


def _make_queue_root(repro_root: Path) -> None:
    """Make the repro directory and its queue directory; a usage error where they cannot be
    written."""
    unusable = unusable_directory(repro_root)
    if unusable is None:
        try:
            make_directory(repro_root / QUEUE_DIR, within=repro_root)
        except UnsafePath as error:
            unusable = str(error)
    if unusable is not None:
        raise pytest.UsageError(
            f"compile accuracy: cannot write in the repro directory {repro_root}: "
            f"{unusable}; give a writable one with --compile-accuracy-dir"
        )


def _run_and_queue(config: pytest.Config, repro_root: Path) -> tuple[str, Path, str | None]:
    """This run's id, its queue directory and this process's xdist worker id: the controller's,
    handed to a worker, or made here by a process that runs alone (no worker id)."""
    workerinput = getattr(config, "workerinput", None)
    if workerinput is not None and RUN_KEY in workerinput:
        worker = str(workerinput.get("workerid", "gw0"))
        return workerinput[RUN_KEY], Path(workerinput[QUEUE_KEY]), worker
    run_id = f"{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    return run_id, repro_root / QUEUE_DIR / run_id, None


def _listed_devices(config: pytest.Config) -> list[int]:
    """The CUDA devices the run lists; a usage error, before the run makes anything, for one this
    machine does not show (the xdist controller asks too, so its workers never start)."""
    devices = options.option("compile-accuracy-devices")
    listed = list(options.option_value(config, devices))
    if listed:
        visible = allowed.Devices(visible=_cuda_devices())
        options.option_value(config, dataclasses.replace(devices, allowed=visible))
    return listed


def _cuda_devices() -> int:
    # Only where devices are listed or chosen: an xdist controller need not import torch.
    import torch

    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def _select_device(listed: list[int], worker: str | None) -> str | None:
    if worker is None and not listed:
        return (
            None  # see device_index; asked without torch, which an xdist controller need not import
        )
    # Only where a device is chosen, as in _cuda_devices.
    import torch

    index = device_index(worker, listed, _cuda_devices())
    if index is None:
        return None
    torch.cuda.set_device(index)
    return f"cuda:{index}"


def _progress_writer(
    config: pytest.Config, coordinator: Coordinator, nodeid: str
) -> Callable[[MinifyProgress], None]:
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


def run_minify_phase(config: pytest.Config, state: RunState) -> bool:
    """From ``pytest_sessionfinish``: take part in the minify phase; the controller (or the single
    process) then records every job's result and prints the summary lines. Returns whether the
    phase was interrupted (Ctrl-C): the case being minified stops, its judging process is
    killed, and the cases not minified keep their repros and say so."""
    coordinator = config.stash.get(COORDINATOR_KEY, None)
    if coordinator is None:  # configure() did not run: minify here, one case after the other
        _run_in_process(config, state)
        return False
    coordinator.flush()
    if coordinator.interrupted:
        coordinator.leave()
        if coordinator.role is Role.CONTROLLER and coordinator.queue is not None:
            # The workers minify in their own session's end, while the controller still waits
            # for them in its test loop, where the interrupt came: their jobs are recorded as
            # they stand, those not done kept unminified and saying so.
            report(config, state, coordinator.queue)
        coordinator.remove_queue()
        return False
    minifiers: list[Minifier] = []
    cap: int = options.option_value(config, options.option("compile-accuracy-minify-workers"))

    def run_job(job: dict[str, Any]) -> MinifyResult:
        assert coordinator.queue is not None and coordinator.me is not None
        if not minifiers:
            minifiers.append(load_minifier(config, state, coordinator.spares))
        progress = _progress_writer(config, coordinator, job["nodeid"])
        # CPU users: the jobs under way or waiting, and the processes still running tests
        pending, running, testing = coordinator.queue.census(coordinator.me)
        at_once = min(coordinator.queue.minifiers(), pending + running + testing)
        with budget.children_limited(
            budget.for_minifying(config, min(at_once, cap) if cap > 0 else at_once)
        ):
            return minifiers[0](
                Path(job["repro_path"]),
                timeout_s=job["timeout_s"],
                progress=progress,
                device=coordinator.job_devices.get(job["repro_path"], coordinator.device),
            )

    try:
        coordinator.join(MINIFYING)
        assert coordinator.queue is not None and coordinator.me is not None
        drain(coordinator.queue, coordinator.me, run_job, cap)
    except KeyboardInterrupt:
        # Raised through the minifier, whose judging process is killed on the way out.
        coordinator.interrupted = True
    finally:
        coordinator.leave()
    if coordinator.role is not Role.WORKER:
        assert coordinator.queue is not None  # joined above
        report(config, state, coordinator.queue)
        coordinator.remove_queue()
    return coordinator.interrupted


def _run_in_process(config: pytest.Config, state: RunState) -> None:
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    jobs = state.take_minify_jobs()
    minifier = load_minifier(config, state) if jobs else None
    for job in jobs:
        assert minifier is not None
        result = minifier(Path(job.repro_path), timeout_s=job.timeout_s)
        state.record_minified(job.case_id, result)
        if reporter is not None:
            reporter.write_line(TerminalLayout.of(config).fit(result.summary_line(job.nodeid)))


def report(config: pytest.Config, state: RunState, queue: WorkQueue) -> None:
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
    for path, why in queue.skipped.items():
        line = f"WARNING compile accuracy: {path} left out of the minify queue: {why}"
        if reporter is not None:
            reporter.write_line(TerminalLayout.of(config).fit(line), yellow=True)
