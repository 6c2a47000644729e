"""The judges a minifier asks: :class:`IsolatedJudge` (a warm child process, :mod:`.child`) and
:class:`InProcessJudge` (this process); and judging children started ahead (:class:`SpareChildren`)."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import torch
import torch.fx

from pytest_torchcompile.common import budget
from pytest_torchcompile.common.kinds import FailureKind
from pytest_torchcompile.common.verdict import leaves_device_unusable
from pytest_torchcompile.judging.capture import private_copy
from pytest_torchcompile.judging.isolation.process_setup import config_patches, import_setup_modules
from pytest_torchcompile.judging.isolation.protocol import (
    PREPARED_KEPT,
    ChildSetup,
    GraphToPrepare,
    Judge,
    Judged,
    JudgePrepared,
    JudgeSettings,
    Kernel,
    KernelSource,
    Prepare,
    Ready,
    Reply,
    Request,
    Stage,
    StageAttributed,
    StageQuery,
    StartFailed,
    Unjudged,
    VerdictFunction,
    WarmUp,
    encode_candidate,
    saved,
)
from pytest_torchcompile.judging.isolation.tasks import (
    judge_candidate,
    kernel_source,
    stage_of,
    unattributed,
)
from pytest_torchcompile.judging.judge import GraphVerdict
from pytest_torchcompile.judging.stages import StageAttribution
from pytest_torchcompile.torch_internals.config import inductor_config
from pytest_torchcompile.torch_internals.fingerprint import compiler_fingerprint

CHILD_MODULE = "pytest_torchcompile.judging.isolation"
"""Run with ``python -m``: its ``__main__`` starts the child's loop (``child.child_main``)."""


class InProcessJudge:
    """Judges in this process under the case's Inductor config (undone on exit): no start-up
    cost, but a crashing candidate takes the process down with it."""

    restarts = 0
    deaths: tuple[str, ...] = ()

    def __init__(
        self, config_source: str = "", verdict_function: VerdictFunction = judge_candidate
    ) -> None:
        self._patches = config_patches(config_source)
        self._verdict_function = verdict_function
        self._stack = contextlib.ExitStack()

    def __enter__(self) -> InProcessJudge:
        import_setup_modules()
        self._stack.enter_context(inductor_config(self._patches))
        return self

    def __exit__(self, *exc: object) -> None:
        self._stack.close()

    def __call__(
        self, gm: torch.fx.GraphModule, inputs: list[Any], settings: JudgeSettings
    ) -> GraphVerdict:
        return self._verdict_function(settings, private_copy(gm), inputs)

    def kernel_source(
        self, gm: torch.fx.GraphModule, inputs: list[Any], settings: JudgeSettings
    ) -> str | None:
        return kernel_source(private_copy(gm), inputs, settings)

    def attribute_stage(
        self, gm: torch.fx.GraphModule, inputs: list[Any], query: StageQuery
    ) -> StageAttribution:
        return stage_of(query, gm, inputs, self._patches)


class IsolationError(RuntimeError):
    """The judging child could not be started."""


def _child_setup(
    config_source: str, verdict_function: VerdictFunction, device: str | None
) -> ChildSetup:
    config_patches(config_source)  # fail here, not in the child, on a malformed config
    return ChildSetup(config_source, verdict_function, _cuda_index(device) is not None)


@dataclass
class _Child:
    process: subprocess.Popen[bytes]
    requests: Connection
    replies: Connection
    log: Path
    threads: tuple[str | None, ...]
    """The thread counts it was started with (see :func:`_thread_environment`)."""
    ready: bool = False


def _thread_environment() -> tuple[str | None, ...]:
    return tuple(os.environ.get(name) for name in budget.CHILD_ENV)


def _child_environment(cuda_index: int | None) -> dict[str, str]:
    """This process's environment for a judging child that judges on the GPU of that index (of
    those this process sees), or on the host (None)."""
    env = dict(os.environ)
    # The child imports what this process can: the package, and test modules that define
    # verdict functions.
    env["PYTHONPATH"] = os.pathsep.join(
        [entry for entry in sys.path if entry and os.path.isdir(entry)]
        + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else [])
    )
    if cuda_index is not None:
        # The index counts the GPUs this process sees, which CUDA_VISIBLE_DEVICES may narrow.
        visible = [
            entry.strip()
            for entry in env.get("CUDA_VISIBLE_DEVICES", "").split(",")
            if entry.strip()
        ]
        env["CUDA_VISIBLE_DEVICES"] = (
            visible[cuda_index] if cuda_index < len(visible) else str(cuda_index)
        )
    return env


def _spawn_child(setup: ChildSetup | None, device: str | None, log_path: Path) -> _Child:
    """A started judging child; ``setup``, where given, is sent at once (None: the child
    imports the compiler and waits for one)."""
    requests_read, requests_write = os.pipe()
    replies_read, replies_write = os.pipe()
    index = _cuda_index(device)
    env = _child_environment(index)
    with open(log_path, "ab") as log:
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                CHILD_MODULE,
                str(requests_read),
                str(replies_write),
                _judged_on(index),
                str(_probe_marker(log_path)),
            ],
            pass_fds=(requests_read, replies_write),
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            start_new_session=True,
        )
    os.close(requests_read)
    os.close(replies_write)
    child = _Child(
        process,
        Connection(requests_write, readable=False),
        Connection(replies_read, writable=False),
        log_path,
        _thread_environment(),
    )
    if setup is not None:
        child.requests.send(setup)
    return child


class SpareChildren:
    """Judging children started ahead of the case they judge (:meth:`prestart`,
    :meth:`prestart_unset`), not yet adopted by an :class:`IsolatedJudge`; whoever makes one
    closes it, killing those never adopted."""

    def __init__(self) -> None:
        self._waiting: dict[tuple[ChildSetup | None, str | None], _Child] = {}
        """By setup (None: a child sent none yet, which any setup of its device adopts) and
        device."""

    def prestart(
        self,
        config_source: str,
        device: str | None = None,
        verdict_function: VerdictFunction = judge_candidate,
    ) -> None:
        """Start the judging child of a case now (once a failing case is known), so that its start
        (Python, torch, Inductor's CPU probes) overlaps the rest of the test run instead of opening
        the minify phase. The first :class:`IsolatedJudge` of the same setup given these spares
        adopts it. At most one waits at a time."""
        if not self._waiting:
            self._start(_child_setup(config_source, verdict_function, device), device)

    def prestart_unset(self, device: str | None = None) -> None:
        """Start a judging child for ``device`` before any case is known: it imports torch and
        Inductor, then waits for the setup of the first judge of that device that adopts it. At
        most one waits at a time."""
        if not self._waiting:
            self._start(None, device)

    def _start(self, setup: ChildSetup | None, device: str | None) -> None:
        # One waits at a time: a child holds a torch of its own in memory.
        workdir = Path(tempfile.mkdtemp(prefix="pytest-torchcompile-judge-"))
        self._waiting[(setup, device)] = _spawn_child(setup, device, workdir / "child.log")

    def adopt(self, setup: ChildSetup, device: str | None) -> _Child | None:
        """The prestarted child of this setup (or one waiting for its setup, which it is sent),
        if it still runs with the thread counts children get now."""
        unset = (None, device) in self._waiting and (setup, device) not in self._waiting
        child = self._waiting.pop((None, device) if unset else (setup, device), None)
        if child is None:
            return None
        if child.process.poll() is None and child.threads == _thread_environment():
            try:
                if unset:
                    child.requests.send(setup)
                return child
            except OSError:
                pass
        _discard(child)
        return None

    def keep(self, setup: ChildSetup, device: str | None, child: _Child) -> bool:
        """Hold a running child that its judge is done with for the next judge of its setup (see
        :meth:`IsolatedJudge.hand_over`); False, keeping nothing, when one already waits."""
        if self._waiting:
            return False
        self._waiting[(setup, device)] = child
        return True

    def __len__(self) -> int:
        return len(self._waiting)

    def close(self) -> None:
        while self._waiting:
            _discard(self._waiting.popitem()[1])


def _discard(child: _Child) -> None:
    _end(child)
    shutil.rmtree(child.log.parent, ignore_errors=True)


class IsolatedJudge:
    """A warm child process that judges candidates (context manager).

    ``device`` ("cuda:N") makes GPU N the only one the child sees; every CUDA tensor and device
    of a candidate is moved onto it. A candidate gets ``candidate_timeout_s`` to be judged; the
    first one a child judges also pays Inductor's one-time costs (CPU feature probes, workers).
    With ``spares``, a child prestarted there for the same setup is adopted instead of starting one.
    """

    def __init__(
        self,
        config_source: str = "",
        *,
        device: str | None = None,
        candidate_timeout_s: float = 300.0,
        startup_timeout_s: float = 300.0,
        verdict_function: VerdictFunction = judge_candidate,
        spares: SpareChildren | None = None,
    ) -> None:
        self._device = device
        self._spares = spares
        self._setup = _child_setup(config_source, verdict_function, device)
        self._candidate_timeout_s = candidate_timeout_s
        self._startup_timeout_s = startup_timeout_s
        self._workdir = Path(tempfile.mkdtemp(prefix="pytest-torchcompile-judge-"))
        self._child: _Child | None = None
        self._prepared_by: OrderedDict[int, tuple[_Child, threading.Thread]] = OrderedDict()
        self._sending = threading.Lock()
        self.restarts = 0
        self.deaths: list[str] = []
        """How each child that died while judging died (``died of signal SIGKILL``), in order."""

    def __enter__(self) -> IsolatedJudge:
        # Start now (unless one was prestarted): the child imports torch and Inductor while the
        # caller loads the case.
        self._child = (
            self._spares.adopt(self._setup, self._device) if self._spares is not None else None
        )
        if self._child is not None:
            shutil.rmtree(self._workdir, ignore_errors=True)
            self._workdir = self._child.log.parent
        else:
            self._child = self._spawn()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop_child()
        shutil.rmtree(self._workdir, ignore_errors=True)

    def __call__(
        self, gm: torch.fx.GraphModule, inputs: list[Any], settings: JudgeSettings
    ) -> GraphVerdict:
        return self._verdict(self._request(Judge(settings, encode_candidate(gm, inputs))))

    def hand_over(self, spares: SpareChildren) -> bool:
        """Give this judge's started child to ``spares``, for the next judge of the same setup
        (the minify phase's adopts it: one child's start, not two); this judge starts another if
        asked again. False where it has none to give, holds graphs prepared there, or ``spares``
        holds one already."""
        child = self._child
        if (
            child is None
            or not child.ready
            or child.process.poll() is not None
            or self._prepared_by
            or not spares.keep(self._setup, self._device, child)
        ):
            return False
        self._child = None
        self._workdir = Path(
            tempfile.mkdtemp(prefix="pytest-torchcompile-judge-")
        )  # the old one goes with it
        return True

    def _verdict(self, reply: Reply) -> GraphVerdict:
        """The verdict of a judging request's reply: the child's, with whether it left the device
        unusable (the child is then replaced), or one saying the child died or hung."""
        if isinstance(reply, Unjudged):
            return reply.verdict
        assert isinstance(reply, Judged), reply
        if reply.poisoned:
            self._stop_child()
        return reply.verdict

    def kernel_source(
        self, gm: torch.fx.GraphModule, inputs: list[Any], settings: JudgeSettings
    ) -> str | None:
        reply = self._request(Kernel(settings, encode_candidate(gm, inputs)))
        return reply.source if isinstance(reply, KernelSource) else None

    def attribute_stage(
        self, gm: torch.fx.GraphModule, inputs: list[Any], query: StageQuery
    ) -> StageAttribution:
        """:func:`stage_of` in the child; a crash or hang of the child is the answer's note."""
        reply = self._request(Stage(query, encode_candidate(gm, inputs)))
        if isinstance(reply, StageAttributed):
            return reply.attribution
        assert isinstance(reply, Unjudged), reply
        if leaves_device_unusable(reply.verdict.error or ""):
            self._stop_child()
        return unattributed(query, reply.verdict.error)

    def prepare(self, gm: torch.fx.GraphModule, graph: GraphToPrepare) -> None:
        """Have the child compile ``gm`` for inputs of ``graph.input_specs`` under its config now,
        while this process goes on; :meth:`judge_prepared` judges it on real inputs later."""
        child = self._running_child()
        # Sent from a thread: a child still starting reads nothing yet, and a graph larger than
        # the pipe's buffer would hold this process up until it does.
        sender = threading.Thread(
            target=self._send, args=(child, Prepare(graph, encode_candidate(gm, []))), daemon=True
        )
        sender.start()
        self._prepared_by[graph.key] = (child, sender)
        while len(self._prepared_by) > PREPARED_KEPT:  # the child keeps no more either
            self._prepared_by.popitem(last=False)

    def _send(self, child: _Child, message: Request) -> None:
        with self._sending, contextlib.suppress(OSError):
            child.requests.send(message)

    def warm_up(self) -> None:
        """Have the child pay Inductor's one-time costs on its device now (a first compile there),
        before a graph to prepare comes."""
        self._send(self._running_child(), WarmUp())

    def judge_prepared(self, key: int, inputs: list[Any], settings: JudgeSettings) -> GraphVerdict:
        """The verdict on a prepared graph run on ``inputs`` (laid out as its input specs), once
        the child has compiled it; a child that died meanwhile gives ``CRASHED``. Where the
        child's compiler code differs from this process's (:func:`compiler_fingerprint`,
        taken now, when this process has compiled what it compiles), its compile is not this
        process's, and the verdict is a ``JUDGE_ERROR`` saying so."""
        if key not in self._prepared_by:
            return GraphVerdict(
                FailureKind.JUDGE_ERROR, error="NotPrepared: no graph was prepared under this key"
            )
        child, sender = self._prepared_by[key]
        sender.join()
        if child is not self._child or child.process.poll() is not None:
            return GraphVerdict(
                FailureKind.CRASHED,
                error=f"CandidateCrashed: the judging process "
                f"{self._reap() if child is self._child else 'was replaced'} "
                "while compiling the graph",
            )
        fingerprint = compiler_fingerprint()
        return self._verdict(
            self._request(JudgePrepared(key, settings, fingerprint, saved(list(inputs))))
        )

    def _request(self, message: Request) -> Reply:
        """Send one request and wait for its reply; a dead or hung child yields the verdict
        that says so (and is replaced at the next request)."""
        child = self._ready_child()
        try:
            with self._sending:
                child.requests.send(message)
            if not child.replies.poll(self._candidate_timeout_s):
                self._stop_child()
                return Unjudged(
                    GraphVerdict(
                        FailureKind.TIMED_OUT,
                        error=f"CandidateTimedOut: no verdict within "
                        f"{self._candidate_timeout_s:.0f} s",
                    )
                )
            reply: Reply = child.replies.recv()
            return reply
        except (EOFError, OSError):
            return Unjudged(
                GraphVerdict(
                    FailureKind.CRASHED,
                    error=f"CandidateCrashed: the judging process {self._reap()}",
                )
            )

    def _running_child(self) -> _Child:
        """The child, started anew if it died or was stopped (between requests: no candidate's
        fault)."""
        if self._child is not None and self._child.process.poll() is not None:
            self._reap()
        if self._child is None:
            self.restarts += 1
            self._child = self._spawn()
        return self._child

    def _ready_child(self) -> _Child:
        child = self._running_child()
        if child.ready:
            return child
        try:
            if not child.replies.poll(self._startup_timeout_s):
                self._stop_child()
                raise IsolationError(
                    f"the judging process did not start within {self._startup_timeout_s:.0f} s"
                )
            started: Ready | StartFailed = child.replies.recv()
        except (EOFError, OSError) as error:
            raise IsolationError(
                f"the judging process {self._reap()} while starting: {_log_tail(child.log)}"
            ) from error
        if isinstance(started, StartFailed):
            self._stop_child()
            raise IsolationError(f"the judging process failed to start: {started.error}")
        child.ready = True
        return child

    def _spawn(self) -> _Child:
        return _spawn_child(self._setup, self._device, self._workdir / "child.log")

    def _reap(self) -> str:
        """Wait for the dead child and say how it died."""
        child = self._child
        self._child = None
        if child is None:
            return "was not running"
        try:
            code = child.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            _kill(child)
            code = child.process.wait()
        _close(child)
        how = (
            f"died of signal {signal.Signals(-code).name}"
            if code < 0
            else f"exited with status {code}"
        )
        self.deaths.append(how)
        return how

    def _stop_child(self) -> None:
        # Killed rather than asked to exit: a child holds nothing worth saving, and Inductor's
        # compile workers can take seconds to shut down.
        child = self._child
        self._child = None
        if child is not None:
            _end(child)


def _log_tail(log: Path, lines: int = 15) -> str:
    text = log.read_text(errors="replace") if log.exists() else ""
    return "\n".join(text.strip().splitlines()[-lines:]) or "(no output)"


def _cuda_index(device: str | None) -> int | None:
    if device is None or not device.startswith("cuda:"):
        return None
    return torch.device(device).index


def _kill(child: _Child) -> None:
    """Kill the child and what it started (Inductor's compile workers): its whole session."""
    if child.process.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(child.process.pid, signal.SIGKILL)


def _judged_on(cuda_index: int | None) -> str:
    """What a child judges on, as its command line says: ``cuda`` (one GPU), ``cpu`` (no GPU
    on this machine: the child probes the CPU's vector ISAs as it starts), or ``any`` (a child
    that sees every GPU: its candidates may be CUDA graphs, which need no CPU probes)."""
    if cuda_index is not None:
        return "cuda"
    return "any" if torch.cuda.is_available() else "cpu"


PROBES_GRACE_S = 120.0
"""How long a child's CPU probes may go on building before it is killed regardless."""


def _probe_marker(log_path: Path) -> Path:
    """The file a child keeps while its CPU probes build (see ``child._start_probes``)."""
    return log_path.with_name("probing")


def _end(child: _Child) -> None:
    # Not while its probes build: a build cut short would break the shared Inductor cache.
    marker, deadline = _probe_marker(child.log), time.monotonic() + PROBES_GRACE_S
    while marker.exists() and child.process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    _kill(child)
    child.process.wait()
    _close(child)


def _close(child: _Child) -> None:
    for connection in (child.requests, child.replies):
        with contextlib.suppress(OSError):
            connection.close()
