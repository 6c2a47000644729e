"""Judge minifier candidates in a warm child process, or in this one.

A candidate can crash the process that compiles and runs it (a segfault or an abort in generated
code), hang, or leave the CUDA context unusable. Judged in a child, each of those costs a restart
instead of the pytest session: the child imports torch and Inductor once, then judges every
candidate of a case, so Inductor's one-time costs are paid once; a death is classified as
``CRASHED``, a hang as ``TIMED_OUT``, and the next candidate gets a fresh child.
"""

from __future__ import annotations

import ast
import atexit
import contextlib
import importlib
import importlib.util
import io
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import traceback
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import torch
import torch.fx

from pytest_torchcompile.judging.capture import TensorSpec, private_copy
from pytest_torchcompile.judging.case import ReproCase
from pytest_torchcompile.judging.judge import (
    ACCURACY,
    COMPILE_ERROR,
    DYNAMO,
    POST_AOT,
    GraphVerdict,
    clone_values,
    differentiating,
    error_signature,
    full_fp32_precision,
    judge_graph,
    register_ops,
)
from pytest_torchcompile.judging.stages import FailureKind, StageAttribution, attribute_stage
from pytest_torchcompile.run import budget
from pytest_torchcompile.run.verdict import DEFAULT_TOLERANCE, leaves_device_unusable
from pytest_torchcompile.torch_internals import compat as _torch_compat

CRASHED = "crashed"
TIMED_OUT = "timed_out"
JUDGE_ERROR = "judge_error"
"""Failure kinds only a judge outside ``judge_graph`` gives; never the failure a case recorded,
except ``CRASHED`` for a case whose recorded failure was that crash."""

CONFIG_PREFIX = "torch._inductor.config."

SETUP_VARIABLE = "PYTEST_TORCHCOMPILE_SETUP"
"""Modules (``package.module``) or files (``path/to/setup.py``), comma-separated, that a judging
process imports before it judges anything: custom backends, op registrations, Inductor passes
or lowerings that the process which found the failure had and a fresh process lacks."""


@dataclass(frozen=True)
class JudgeSettings:
    """How a candidate is judged; the Inductor config and the device belong to the judge."""

    tol: float = DEFAULT_TOLERANCE
    check_non_float: bool = False
    grad_enabled: bool = False
    level: str = POST_AOT

    @classmethod
    def for_minifying(cls, case: ReproCase) -> JudgeSettings:
        # An accuracy candidate must keep a floating deviation: a flipped bool mask that never
        # reaches a floating output must not steer the reduction.
        return cls(case.tol, case.check_non_float and case.kind != ACCURACY, case.grad_enabled, case.level)


VerdictFunction = Callable[[JudgeSettings, torch.fx.GraphModule, list[Any]], GraphVerdict]
"""Judges one candidate where it runs; module-level, so that it pickles by name to the child."""


def judge_candidate(settings: JudgeSettings, gm: torch.fx.GraphModule, inputs: list[Any]) -> GraphVerdict:
    """The real judging: ``judge_graph`` as a repro file runs it."""
    torch.manual_seed(0)
    try:
        with torch.set_grad_enabled(settings.grad_enabled):
            return judge_graph(gm, inputs, settings.tol, settings.check_non_float, level=settings.level)
    except Exception as error:
        # judge_graph classifies eager, compile and run failures itself; anything escaping it
        # is a fault of the judging, which must never pass for the failure being minified.
        return GraphVerdict(JUDGE_ERROR, error=error_signature(error))


@dataclass(frozen=True)
class StageQuery:
    """Which stage of the stack introduces a failure: how the graph is judged (its level among
    them) and how it fails."""

    settings: JudgeSettings
    failure: FailureKind


def stage_of(query: StageQuery, gm: torch.fx.GraphModule, inputs: list[Any],
             config: dict[str, Any]) -> StageAttribution:
    """:func:`stages.attribute_stage` under the query's settings; a fault of the attribution
    itself becomes an ``unattributed`` answer, never an exception."""
    torch.manual_seed(0)
    try:
        with torch.set_grad_enabled(query.settings.grad_enabled):
            return attribute_stage(gm, inputs, query.settings.level, query.settings.tol, query.failure,
                                   check_non_float=query.settings.check_non_float, config=config)
    except Exception as error:
        return _unattributed(query, error_signature(error))


def _unattributed(query: StageQuery, error: str | None) -> StageAttribution:
    """The answer when attributing the stage itself failed (raised, crashed, hung)."""
    return StageAttribution("unattributed", f"stage attribution failed: {error}", level=query.settings.level)


@dataclass(frozen=True)
class GraphToPrepare:
    """A graph for a judging child to compile ahead of its inputs (:meth:`IsolatedJudge.prepare`)."""

    key: int
    config_source: str
    input_specs: list[TensorSpec]


PREPARED_KEPT = 8
"""Compiled graphs a child keeps for :meth:`IsolatedJudge.judge_prepared` (oldest dropped first)."""


def import_setup_modules() -> None:
    """Import what :data:`SETUP_VARIABLE` names (once per process: imports are cached)."""
    for entry in filter(None, (part.strip() for part in os.environ.get(SETUP_VARIABLE, "").split(","))):
        if entry.endswith(".py") or os.sep in entry:
            path = Path(entry).resolve()
            name = f"_pytest_torchcompile_setup_{path.stem}"
            if name in sys.modules:
                continue
            spec = importlib.util.spec_from_file_location(name, path)
            if spec is None or spec.loader is None:
                raise ImportError(f"{SETUP_VARIABLE}: cannot import {entry}")
            module = importlib.util.module_from_spec(spec)
            sys.modules[name] = module
            spec.loader.exec_module(module)
        else:
            importlib.import_module(entry)


def kernel_source(gm: torch.fx.GraphModule, inputs: list[Any], settings: JudgeSettings) -> str | None:
    """The code Inductor generates for ``gm`` (for a torch-level graph: the post-AOT graphs it
    lowers to); None when it does not compile."""
    try:
        if settings.level == DYNAMO:
            with torch.set_grad_enabled(settings.grad_enabled and differentiating(inputs)):
                lowered = _torch_compat.post_aot_graphs(gm, clone_values(inputs, keep_grad=True))
            return "\n\n".join(f"{kind} graph:\n{code}" for kind, code in lowered)
        compiled = _torch_compat.compile_graph(gm, clone_values(inputs))
    except Exception:
        return None
    return _torch_compat.generated_source(compiled)


def config_patches(config_source: str) -> dict[str, Any]:
    """``torch._inductor.config.NAME = VALUE`` lines (a repro's config) as ``{NAME: value}``.

    Values are evaluated rather than the lines executed, so that they can be applied as a patch
    that is undone afterwards; modules named by values (custom passes) are imported first.
    """
    patches: dict[str, Any] = {}
    for line in config_source.splitlines():
        line = line.strip()
        if not line.startswith(CONFIG_PREFIX):
            continue
        name, separator, expression = line[len(CONFIG_PREFIX):].partition("=")
        if not separator:
            raise ValueError(f"not an Inductor config assignment: {line!r}")
        patches[name.strip()] = eval(expression.strip(), _namespace_for(expression.strip()))
    return patches


def _namespace_for(expression: str) -> dict[str, Any]:
    """Globals for evaluating a config value: torch, inf/nan, and every module it names."""
    namespace: dict[str, Any] = {"torch": torch, "inf": float("inf"), "nan": float("nan")}
    for node in ast.walk(ast.parse(expression, mode="eval")):
        dotted = _dotted_name(node)
        if dotted is None or dotted.split(".")[0] in namespace:
            continue
        parts = dotted.split(".")
        for length in range(len(parts), 0, -1):
            with contextlib.suppress(ImportError):
                importlib.import_module(".".join(parts[:length]))
                namespace[parts[0]] = importlib.import_module(parts[0])
                break
    return namespace


def _dotted_name(node: ast.AST) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _dotted_name(node.value)
        return None if base is None else f"{base}.{node.attr}"
    return None


class InProcessJudge:
    """Judges in this process under the case's Inductor config (undone on exit): no start-up
    cost, but a crashing candidate takes the process down with it."""

    restarts = 0
    deaths: tuple[str, ...] = ()

    def __init__(self, config_source: str = "", verdict_function: VerdictFunction = judge_candidate) -> None:
        self._patches = config_patches(config_source)
        self._verdict_function = verdict_function
        self._stack = contextlib.ExitStack()

    def __enter__(self) -> InProcessJudge:
        import_setup_modules()
        self._stack.enter_context(_torch_compat.inductor_config(self._patches))
        return self

    def __exit__(self, *exc: object) -> None:
        self._stack.close()

    def __call__(self, gm: torch.fx.GraphModule, inputs: list[Any], settings: JudgeSettings) -> GraphVerdict:
        return self._verdict_function(settings, private_copy(gm), inputs)

    def kernel_source(self, gm: torch.fx.GraphModule, inputs: list[Any], settings: JudgeSettings) -> str | None:
        return kernel_source(private_copy(gm), inputs, settings)

    def attribute_stage(self, gm: torch.fx.GraphModule, inputs: list[Any], query: StageQuery) -> StageAttribution:
        return stage_of(query, gm, inputs, self._patches)


class IsolationError(RuntimeError):
    """The judging child could not be started."""


@dataclass(frozen=True)
class _ChildSetup:
    """The first message to a child: everything that stays fixed across its candidates."""

    config_source: str
    verdict_function: VerdictFunction
    single_visible_cuda_device: bool

    @classmethod
    def of(cls, config_source: str, verdict_function: VerdictFunction, device: str | None) -> _ChildSetup:
        config_patches(config_source)  # fail here, not in the child, on a malformed config
        return cls(config_source, verdict_function, _cuda_index(device) is not None)


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


def _spawn_child(setup: _ChildSetup, device: str | None, log_path: Path) -> _Child:
    requests_read, requests_write = os.pipe()
    replies_read, replies_write = os.pipe()
    env = dict(os.environ)
    # The child imports what this process can: the package, and test modules that define
    # verdict functions.
    env["PYTHONPATH"] = os.pathsep.join(
        [entry for entry in sys.path if entry and os.path.isdir(entry)]
        + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else [])
    )
    index = _cuda_index(device)
    if index is not None:
        # The index counts the GPUs this process sees, which CUDA_VISIBLE_DEVICES may narrow.
        visible = [entry.strip() for entry in env.get("CUDA_VISIBLE_DEVICES", "").split(",") if entry.strip()]
        env["CUDA_VISIBLE_DEVICES"] = visible[index] if index < len(visible) else str(index)
    with open(log_path, "ab") as log:
        process = subprocess.Popen(
            [sys.executable, "-c", "from pytest_torchcompile.judging.isolation import child_main; child_main()",
             str(requests_read), str(replies_write)],
            pass_fds=(requests_read, replies_write), env=env, stdin=subprocess.DEVNULL,
            stdout=log, stderr=log, start_new_session=True,
        )
    os.close(requests_read)
    os.close(replies_write)
    child = _Child(process, Connection(requests_write, readable=False), Connection(replies_read, writable=False),
                   log_path, _thread_environment())
    child.requests.send(setup)
    return child


_spares: dict[tuple[_ChildSetup, str | None], _Child] = {}
"""Judging children started ahead of the minify phase (:func:`prestart`), not yet adopted."""


def prestart(config_source: str, device: str | None = None,
             verdict_function: VerdictFunction = judge_candidate) -> None:
    """Start the judging child of a case now (once a failing case is known), so that its start
    (Python, torch, Inductor's CPU probes) overlaps the rest of the test run instead of opening
    the minify phase. The first :class:`IsolatedJudge` of the same setup in this process adopts
    it; one never adopted is killed when this process exits. At most one waits at a time."""
    if _spares:  # one at a time: a child holds a torch of its own in memory
        return
    setup = _ChildSetup.of(config_source, verdict_function, device)
    workdir = Path(tempfile.mkdtemp(prefix="pytest-torchcompile-judge-"))
    _spares[(setup, device)] = _spawn_child(setup, device, workdir / "child.log")


def _adopt_spare(setup: _ChildSetup, device: str | None) -> _Child | None:
    """The prestarted child of this setup, if it still runs with the thread counts children get now."""
    child = _spares.pop((setup, device), None)
    if child is None:
        return None
    if child.process.poll() is None and child.threads == _thread_environment():
        return child
    _discard(child)
    return None


def _discard(child: _Child) -> None:
    _end(child)
    shutil.rmtree(child.log.parent, ignore_errors=True)


def _kill_spares() -> None:
    while _spares:
        _discard(_spares.popitem()[1])


atexit.register(_kill_spares)


class IsolatedJudge:
    """A warm child process that judges candidates (context manager).

    ``device`` ("cuda:N") makes GPU N the only one the child sees; every CUDA tensor and device
    of a candidate is moved onto it. A candidate gets ``candidate_timeout_s`` to be judged; the
    first one a child judges also pays Inductor's one-time costs (CPU feature probes, workers).
    """

    def __init__(
        self,
        config_source: str = "",
        *,
        device: str | None = None,
        candidate_timeout_s: float = 300.0,
        startup_timeout_s: float = 300.0,
        verdict_function: VerdictFunction = judge_candidate,
    ) -> None:
        self._device = device
        self._setup = _ChildSetup.of(config_source, verdict_function, device)
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
        self._child = _adopt_spare(self._setup, self._device)
        if self._child is not None:
            shutil.rmtree(self._workdir, ignore_errors=True)
            self._workdir = self._child.log.parent
        else:
            self._child = self._spawn()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop_child()
        shutil.rmtree(self._workdir, ignore_errors=True)

    def __call__(self, gm: torch.fx.GraphModule, inputs: list[Any], settings: JudgeSettings) -> GraphVerdict:
        return self._verdict(self._request(("judge", settings, _encode_candidate(gm, inputs))))

    def _verdict(self, reply: GraphVerdict | tuple[GraphVerdict, bool]) -> GraphVerdict:
        """The verdict of a judging request's reply: the child's, with whether it left the device
        unusable (the child is then replaced), or one saying the child died or hung."""
        if isinstance(reply, GraphVerdict):
            return reply
        verdict, poisoned = reply
        if poisoned:
            self._stop_child()
        return verdict

    def kernel_source(self, gm: torch.fx.GraphModule, inputs: list[Any], settings: JudgeSettings) -> str | None:
        reply = self._request(("kernel", settings, _encode_candidate(gm, inputs)))
        return None if isinstance(reply, GraphVerdict) else reply

    def attribute_stage(self, gm: torch.fx.GraphModule, inputs: list[Any], query: StageQuery) -> StageAttribution:
        """:func:`stage_of` in the child; a crash or hang of the child is the answer's note."""
        reply = self._request(("stage", query, _encode_candidate(gm, inputs)))
        if isinstance(reply, GraphVerdict):
            if leaves_device_unusable(reply.error or ""):
                self._stop_child()
            return _unattributed(query, reply.error)
        return reply

    def prepare(self, gm: torch.fx.GraphModule, graph: GraphToPrepare) -> None:
        """Have the child compile ``gm`` for inputs of ``graph.input_specs`` under its config now,
        while this process goes on; :meth:`judge_prepared` judges it on real inputs later."""
        child = self._running_child()
        # Sent from a thread: a child still starting reads nothing yet, and a graph larger than
        # the pipe's buffer would hold this process up until it does.
        sender = threading.Thread(target=self._send, args=(child, ("prepare", graph, _encode_candidate(gm, []))),
                                  daemon=True)
        sender.start()
        self._prepared_by[graph.key] = (child, sender)
        while len(self._prepared_by) > PREPARED_KEPT:  # the child keeps no more either
            self._prepared_by.popitem(last=False)

    def _send(self, child: _Child, message: tuple[str, Any, Any]) -> None:
        with self._sending, contextlib.suppress(OSError):
            child.requests.send(message)

    def warm_up(self) -> None:
        """Have the child pay Inductor's one-time costs on its device now (a first compile there),
        before a graph to prepare comes."""
        self._send(self._running_child(), ("warm_up", None, b""))

    def judge_prepared(self, key: int, inputs: list[Any], settings: JudgeSettings) -> GraphVerdict:
        """The verdict on a prepared graph run on ``inputs`` (laid out as its input specs), once
        the child has compiled it; a child that died meanwhile gives ``CRASHED``. Where the
        child's compiler code differs from this process's (:func:`_torch_compat.compiler_fingerprint`,
        taken now, when this process has compiled what it compiles), its compile is not this
        process's, and the verdict is a ``JUDGE_ERROR`` saying so."""
        if key not in self._prepared_by:
            return GraphVerdict(JUDGE_ERROR, error="NotPrepared: no graph was prepared under this key")
        child, sender = self._prepared_by[key]
        sender.join()
        if child is not self._child or child.process.poll() is not None:
            return GraphVerdict(CRASHED, error=f"CandidateCrashed: the judging process "
                                                f"{self._reap() if child is self._child else 'was replaced'} "
                                                "while compiling the graph")
        fingerprint = _torch_compat.compiler_fingerprint()
        return self._verdict(self._request(("judge_prepared", (key, settings, fingerprint), _saved(list(inputs)))))

    def _request(self, message: tuple[str, Any, Any]) -> Any:
        """Send one request and wait for its reply; a dead or hung child yields the verdict
        that says so (and is replaced at the next request)."""
        child = self._ready_child()
        try:
            with self._sending:
                child.requests.send(message)
            if not child.replies.poll(self._candidate_timeout_s):
                self._stop_child()
                return GraphVerdict(TIMED_OUT, error=f"CandidateTimedOut: no verdict within "
                                                     f"{self._candidate_timeout_s:.0f} s")
            return child.replies.recv()
        except (EOFError, OSError):
            return GraphVerdict(CRASHED, error=f"CandidateCrashed: the judging process {self._reap()}")

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
                raise IsolationError(f"the judging process did not start within {self._startup_timeout_s:.0f} s")
            status, detail = child.replies.recv()
        except (EOFError, OSError) as error:
            raise IsolationError(f"the judging process {self._reap()} while starting: {_log_tail(child.log)}") from error
        if status != "ready":
            self._stop_child()
            raise IsolationError(f"the judging process failed to start: {detail}")
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
        how = f"died of signal {signal.Signals(-code).name}" if code < 0 else f"exited with status {code}"
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


def _end(child: _Child) -> None:
    _kill(child)
    child.process.wait()
    _close(child)


def _close(child: _Child) -> None:
    for connection in (child.requests, child.replies):
        with contextlib.suppress(OSError):
            connection.close()


Candidate = tuple[list[tuple[str, str | None, str | None]], bytes]
"""A candidate as sent to the child: the ops it calls with the modules that register them (the
child has not imported the test module or package that registered a custom op, and loading a
graph traces it), and the saved graph and inputs."""


def _encode_candidate(gm: torch.fx.GraphModule, inputs: list[Any]) -> Candidate:
    required = [(origin.qualname, origin.module, origin.search_path) for origin in _torch_compat.op_origins(gm)]
    return required, _saved((gm, list(inputs)))


def _saved(value: Any) -> bytes:
    """``value`` as ``torch.save`` writes it, for the child's :func:`_loaded`."""
    buffer = io.BytesIO()
    torch.save(value, buffer)
    return buffer.getvalue()


# --- the child -------------------------------------------------------------------------------


def child_main() -> None:
    """Entry point of the judging child: ``python -c ... child_main() REQUESTS_FD REPLIES_FD``."""
    requests = Connection(int(sys.argv[1]), writable=False)
    replies = Connection(int(sys.argv[2]), readable=False)
    try:
        setup: _ChildSetup = requests.recv()
        if setup.single_visible_cuda_device and not torch.cuda.is_available():
            raise RuntimeError(f"no CUDA device {os.environ.get('CUDA_VISIBLE_DEVICES')} to judge on")
        # Before the thread below imports parts of Inductor: one module imported from two
        # threads at once can be seen half-initialized by either (a circular-import error).
        _torch_compat.import_compiler()
        if not setup.single_visible_cuda_device:
            # While the first candidate comes and is lowered.
            threading.Thread(target=_torch_compat.probe_cpu_vector_isas, daemon=True).start()
        import_setup_modules()
        patches = config_patches(setup.config_source)
    except Exception as error:
        traceback.print_exc()
        replies.send(("failed", error_signature(error)))
        return
    with _torch_compat.inductor_config(patches):
        replies.send(("ready", None))
        _serve(setup, patches, requests, replies)


def _serve(setup: _ChildSetup, patches: dict[str, Any], requests: Connection, replies: Connection) -> None:
    prepared: OrderedDict[int, _Prepared] = OrderedDict()
    while True:
        try:
            kind, settings, payload = requests.recv()
        except EOFError:
            return
        if kind == "prepare":
            prepared[settings.key] = _prepare(settings, payload, setup.single_visible_cuda_device)
            while len(prepared) > PREPARED_KEPT:
                prepared.popitem(last=False)
            continue
        if kind == "warm_up":
            with contextlib.suppress(Exception):
                _torch_compat.warm_up_inductor("cuda:0" if setup.single_visible_cuda_device else "cpu")
            continue
        if kind == "judge_prepared":
            key, judge_settings, fingerprint = settings
            verdict = _judge_prepared(prepared.get(key), judge_settings, fingerprint, payload,
                                      setup.single_visible_cuda_device)
        else:
            try:
                gm, inputs = _decode_candidate(payload, setup.single_visible_cuda_device)
            except Exception as error:
                replies.send(GraphVerdict(JUDGE_ERROR, error=error_signature(error)))
                continue
            if kind == "kernel":
                replies.send(kernel_source(gm, inputs, settings))
                continue
            if kind == "stage":
                replies.send(stage_of(settings, gm, inputs, patches))
                continue
            verdict = setup.verdict_function(settings, gm, inputs)
        poisoned = leaves_device_unusable(verdict.error or "")
        replies.send((verdict, poisoned))
        if poisoned:
            return


@dataclass
class _Prepared:
    """A graph a child compiled ahead of its inputs, or why it cannot judge it."""

    gm: torch.fx.GraphModule | None
    compiled: Callable[..., Any] | None = None
    unusable: GraphVerdict | None = None


def _prepare(graph: GraphToPrepare, payload: Candidate, single_visible_cuda_device: bool) -> _Prepared:
    try:
        gm, _ = _decode_candidate(payload, single_visible_cuda_device)
        patches = config_patches(graph.config_source)
        placeholders = [_allocated(spec, single_visible_cuda_device) for spec in graph.input_specs]
    except Exception as error:
        return _Prepared(None, unusable=GraphVerdict(JUDGE_ERROR, error=error_signature(error)))
    entry = _Prepared(gm)
    try:
        # Nothing compiled here goes to the on-disk cache: should the sender's compiler code
        # differ, its own compile of the graph must not find this one's there.
        with _torch_compat.inductor_config({**patches, "fx_graph_cache": False}), \
                _torch_compat.no_compile_caches(), full_fp32_precision():
            entry.compiled = _torch_compat.compile_graph(private_copy(gm), placeholders)
    except Exception as error:
        entry.unusable = GraphVerdict(COMPILE_ERROR, error=error_signature(error))
        return entry
    if all(spec.device.type == "cuda" and spec.dtype.is_floating_point for spec in graph.input_specs):
        # A first run tunes the Triton kernels' launch configs, which would otherwise wait for
        # the real inputs; on zeros, which no op can index out of bounds with.
        with contextlib.suppress(Exception):
            entry.compiled(*(placeholder.zero_() for placeholder in placeholders))
            torch.cuda.synchronize()
    return entry


def _allocated(spec: TensorSpec, single_visible_cuda_device: bool) -> torch.Tensor:
    device = _onto_visible_cuda(spec.device) if single_visible_cuda_device else spec.device
    return torch.empty_strided(spec.shape, spec.stride, dtype=spec.dtype, device=device)


def _judge_prepared(entry: _Prepared | None, settings: JudgeSettings, fingerprint: dict[str, str], payload: bytes,
                    single_visible_cuda_device: bool) -> GraphVerdict:
    if entry is None:
        return GraphVerdict(JUDGE_ERROR, error="NotPrepared: the judging process no longer holds that graph")
    own = _torch_compat.compiler_fingerprint([name for name in fingerprint if "[" not in name])
    differing = sorted(name for name, digest in fingerprint.items() if own.get(name, digest) != digest)
    if differing:
        return GraphVerdict(JUDGE_ERROR, error=f"ForeignCompilerCode: the compiler code of the process that "
                                               f"sent the graph differs here: {', '.join(differing[:5])}")
    if entry.unusable is not None:
        return entry.unusable
    assert entry.gm is not None and entry.compiled is not None
    compiled = entry.compiled
    try:
        inputs = _loaded(payload, single_visible_cuda_device)
    except Exception as error:
        return GraphVerdict(JUDGE_ERROR, error=error_signature(error))
    torch.manual_seed(0)
    try:
        return judge_graph(entry.gm, inputs, settings.tol, settings.check_non_float, compiler=lambda gm, inputs: compiled)
    except Exception as error:
        return GraphVerdict(JUDGE_ERROR, error=error_signature(error))


def _decode_candidate(candidate: Candidate, single_visible_cuda_device: bool) -> tuple[torch.fx.GraphModule, list[Any]]:
    required, payload = candidate
    missing = register_ops(required)
    if missing is not None:
        raise RuntimeError(missing)
    gm, inputs = _loaded(payload, single_visible_cuda_device)
    if not single_visible_cuda_device:
        return gm, inputs
    for node in gm.graph.nodes:
        node.args = torch.fx.node.map_aggregate(node.args, _onto_visible_cuda)
        node.kwargs = torch.fx.node.map_aggregate(node.kwargs, _onto_visible_cuda)
    gm.recompile()
    return gm, inputs


def _loaded(payload: bytes, single_visible_cuda_device: bool) -> Any:
    """What ``torch.save`` wrote; where only the chosen GPU is visible (as cuda:0), whatever was on
    a GPU when saved is loaded there."""
    location = _storage_onto_visible_cuda if single_visible_cuda_device else None
    return torch.load(io.BytesIO(payload), weights_only=False, map_location=location)


def _storage_onto_visible_cuda(storage: Any, location: str) -> Any:
    return storage.cuda() if location.startswith("cuda") else storage


def _onto_visible_cuda(value: Any) -> Any:
    return torch.device("cuda", 0) if isinstance(value, torch.device) and value.type == "cuda" else value

