"""The judging child, ``python -m pytest_torchcompile.judging.isolation REQUESTS_FD REPLIES_FD
cpu|cuda|any PROBE_MARKER`` (started by :mod:`.parent`): it sets up once, then answers requests until
its pipe closes."""

from __future__ import annotations

import contextlib
import io
import os
import sys
import threading
import traceback
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any, assert_never

import torch
import torch.fx

from pytest_torchcompile.common.kinds import FailureKind
from pytest_torchcompile.common.verdict import leaves_device_unusable
from pytest_torchcompile.judging.capture import TensorSpec, private_copy
from pytest_torchcompile.judging.isolation.process_setup import config_patches, import_setup_modules
from pytest_torchcompile.judging.isolation.protocol import (
    PREPARED_KEPT,
    PROTOCOL_VERSION,
    Candidate,
    ChildSetup,
    GraphToPrepare,
    Judge,
    Judged,
    JudgePrepared,
    Kernel,
    KernelSource,
    Prepare,
    Ready,
    Reply,
    Request,
    Stage,
    StageAttributed,
    StartFailed,
    Unjudged,
    WarmUp,
)
from pytest_torchcompile.judging.isolation.tasks import kernel_source, stage_of
from pytest_torchcompile.judging.judge import GraphVerdict, error_signature, judge_graph
from pytest_torchcompile.judging.precision import full_fp32_precision
from pytest_torchcompile.judging.registration import register_ops
from pytest_torchcompile.torch_internals.compiling import (
    import_compiler,
    no_compile_caches,
    probe_cpu_vector_isas,
    warm_up_inductor,
)
from pytest_torchcompile.torch_internals.config import inductor_config
from pytest_torchcompile.torch_internals.fingerprint import compiler_fingerprint
from pytest_torchcompile.torch_internals.graph_compile import compile_graph


def child_main() -> None:
    """Entry point of the judging child: ``python -m pytest_torchcompile.judging.isolation
    REQUESTS_FD REPLIES_FD cpu|cuda|any PROBE_MARKER`` (its ``__main__``; see ``parent._judged_on``)."""
    requests = Connection(int(sys.argv[1]), writable=False)
    replies = Connection(int(sys.argv[2]), readable=False)
    try:
        # Before the setup is read: a child started ahead of its case (its setup sent when a
        # case adopts it) imports the compiler while it waits. And before the probe thread
        # below imports parts of Inductor: one module imported from two threads at once can be
        # seen half-initialized by either (a circular-import error).
        import_compiler()
        if sys.argv[3:4] == ["cpu"]:
            # While the setup and the first candidate come: the probes' builds land in the
            # Inductor cache this process shares with its parent, whose first CPU compile
            # would otherwise build them one after another.
            _start_probes(Path(sys.argv[4]))
        setup: ChildSetup = requests.recv()
        # An older parent's setup has no version: read it as none.
        version = getattr(setup, "version", None)
        if version != PROTOCOL_VERSION:
            raise RuntimeError(
                f"ProtocolMismatch: the parent speaks protocol version {version}, this "
                f"judging process {PROTOCOL_VERSION} (two installs of the plugin)"
            )
        if setup.single_visible_cuda_device and not torch.cuda.is_available():
            raise RuntimeError(
                f"no CUDA device {os.environ.get('CUDA_VISIBLE_DEVICES')} to judge on"
            )
        import_setup_modules()
        patches = config_patches(setup.config_source)
    except Exception as error:
        traceback.print_exc()
        replies.send(StartFailed(error_signature(error)))
        return
    with inductor_config(patches):
        replies.send(Ready())
        _serve(setup, patches, requests, replies)


def _start_probes(marker: Path) -> None:
    """Probe the CPU's vector ISAs in a thread, with ``marker`` on disk while the probes build:
    the parent waits for it to go before it kills this process, since a build cut short would
    leave a broken library in the shared cache, and the ISA it probes would read as unusable
    to every later compile there."""
    marker.touch()

    def probe() -> None:
        try:
            probe_cpu_vector_isas()
        finally:
            marker.unlink(missing_ok=True)

    threading.Thread(target=probe, daemon=True).start()


def _serve(
    setup: ChildSetup, patches: dict[str, Any], requests: Connection, replies: Connection
) -> None:
    prepared: OrderedDict[int, _Prepared] = OrderedDict()
    while True:
        try:
            request: Request = requests.recv()
        except EOFError:
            return
        if isinstance(request, Prepare):
            _keep_prepared(prepared, request, setup.single_visible_cuda_device)
            continue
        if isinstance(request, WarmUp):
            with contextlib.suppress(Exception):
                warm_up_inductor("cuda:0" if setup.single_visible_cuda_device else "cpu")
            continue
        if not isinstance(request, Judge | Kernel | Stage | JudgePrepared):
            # A request this process cannot read is an error, answered as one: never a judging.
            replies.send(_unknown(request))
            continue
        reply = _answer(request, setup, patches, prepared)
        replies.send(reply)
        if isinstance(reply, Judged) and reply.poisoned:
            return


def _keep_prepared(
    prepared: OrderedDict[int, _Prepared], request: Prepare, single_visible_cuda_device: bool
) -> None:
    """Prepare the graph ``request`` sends, kept among the last :data:`PREPARED_KEPT`."""
    prepared[request.graph.key] = _prepare(
        request.graph, request.candidate, single_visible_cuda_device
    )
    while len(prepared) > PREPARED_KEPT:
        prepared.popitem(last=False)


def _unknown(request: object) -> Unjudged:
    """The answer to a request that is none of this protocol version's."""
    return Unjudged(
        GraphVerdict(
            FailureKind.JUDGE_ERROR,
            error=f"UnknownRequest: "
            f"{type(request).__name__} is no request of protocol "
            f"version {PROTOCOL_VERSION}",
        )
    )


def _answer(
    request: Judge | Kernel | Stage | JudgePrepared,
    setup: ChildSetup,
    patches: dict[str, Any],
    prepared: OrderedDict[int, _Prepared],
) -> Reply:
    if isinstance(request, JudgePrepared):
        return _judged(
            _judge_prepared(prepared.get(request.key), request, setup.single_visible_cuda_device)
        )
    try:
        gm, inputs = _decode_candidate(request.candidate, setup.single_visible_cuda_device)
    except Exception as error:
        return Unjudged(GraphVerdict(FailureKind.JUDGE_ERROR, error=error_signature(error)))
    match request:
        case Kernel():
            return KernelSource(kernel_source(gm, inputs, request.settings))
        case Stage():
            return StageAttributed(stage_of(request.query, gm, inputs, patches))
        case Judge():
            return _judged(setup.verdict_function(request.settings, gm, inputs))
        case _:
            assert_never(request)


def _judged(verdict: GraphVerdict) -> Judged:
    return Judged(verdict, leaves_device_unusable(verdict.error or ""))


@dataclass
class _Prepared:
    """A graph a child compiled ahead of its inputs, or why it cannot judge it."""

    gm: torch.fx.GraphModule | None
    compiled: Callable[..., Any] | None = None
    unusable: GraphVerdict | None = None


def _prepare(
    graph: GraphToPrepare, payload: Candidate, single_visible_cuda_device: bool
) -> _Prepared:
    try:
        gm, _ = _decode_candidate(payload, single_visible_cuda_device)
        patches = config_patches(graph.config_source)
        placeholders = [_allocated(spec, single_visible_cuda_device) for spec in graph.input_specs]
    except Exception as error:
        return _Prepared(
            None, unusable=GraphVerdict(FailureKind.JUDGE_ERROR, error=error_signature(error))
        )
    entry = _Prepared(gm)
    try:
        # Nothing compiled here goes to the on-disk cache: should the sender's compiler code
        # differ, its own compile of the graph must not find this one's there.
        with (
            inductor_config({**patches, "fx_graph_cache": False}),
            no_compile_caches(),
            full_fp32_precision(),
        ):
            entry.compiled = compile_graph(private_copy(gm), placeholders)
    except Exception as error:
        entry.unusable = GraphVerdict(FailureKind.COMPILE_ERROR, error=error_signature(error))
        return entry
    if all(
        spec.device.type == "cuda" and spec.dtype.is_floating_point for spec in graph.input_specs
    ):
        # A first run tunes the Triton kernels' launch configs, which would otherwise wait for
        # the real inputs; on zeros, which no op can index out of bounds with.
        with contextlib.suppress(Exception):
            entry.compiled(*(placeholder.zero_() for placeholder in placeholders))
            torch.cuda.synchronize()
    return entry


def _allocated(spec: TensorSpec, single_visible_cuda_device: bool) -> torch.Tensor:
    device = _onto_visible_cuda(spec.device) if single_visible_cuda_device else spec.device
    return torch.empty_strided(spec.shape, spec.stride, dtype=spec.dtype, device=device)


def _judge_prepared(
    entry: _Prepared | None, request: JudgePrepared, single_visible_cuda_device: bool
) -> GraphVerdict:
    if entry is None:
        return GraphVerdict(
            FailureKind.JUDGE_ERROR,
            error="NotPrepared: the judging process no longer holds that graph",
        )
    foreign = _foreign_compiler_code(request.fingerprint)
    if foreign is not None:
        return foreign
    if entry.unusable is not None:
        return entry.unusable
    assert entry.gm is not None and entry.compiled is not None
    compiled = entry.compiled
    try:
        inputs = _loaded(request.inputs, single_visible_cuda_device)
    except Exception as error:
        return GraphVerdict(FailureKind.JUDGE_ERROR, error=error_signature(error))
    torch.manual_seed(0)
    try:
        return judge_graph(
            entry.gm,
            inputs,
            request.settings.tol,
            request.settings.check_non_float,
            compiler=lambda gm, inputs: compiled,
        )
    except Exception as error:
        return GraphVerdict(FailureKind.JUDGE_ERROR, error=error_signature(error))


def _foreign_compiler_code(fingerprint: dict[str, str]) -> GraphVerdict | None:
    """The error where the compiler code of the process that prepared a graph (its
    ``fingerprint``) differs from this process's, or None."""
    own = compiler_fingerprint([name for name in fingerprint if "[" not in name])
    differing = sorted(
        name for name, digest in fingerprint.items() if own.get(name, digest) != digest
    )
    if not differing:
        return None
    return GraphVerdict(
        FailureKind.JUDGE_ERROR,
        error=f"ForeignCompilerCode: the compiler code of the process that "
        f"sent the graph differs here: {', '.join(differing[:5])}",
    )


def _decode_candidate(
    candidate: Candidate, single_visible_cuda_device: bool
) -> tuple[torch.fx.GraphModule, list[Any]]:
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
    return (
        torch.device("cuda", 0)
        if isinstance(value, torch.device) and value.type == "cuda"
        else value
    )
