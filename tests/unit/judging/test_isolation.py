"""The judging child: crashes, hangs and poisoned devices cost a restart, never this process;
the case's Inductor config and device reach every child."""

from __future__ import annotations

import ctypes
import functools
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.fx
from torch.fx.experimental.proxy_tensor import make_fx

from pytest_torchcompile.checking.model import check_model
from pytest_torchcompile.common import budget
from pytest_torchcompile.common.kinds import FailureKind
from pytest_torchcompile.common.results import StopReason
from pytest_torchcompile.common.settings import CheckOptions
from pytest_torchcompile.judging.capture import input_spec
from pytest_torchcompile.judging.case import ReproCase
from pytest_torchcompile.judging.isolation import parent
from pytest_torchcompile.judging.isolation.parent import (
    InProcessJudge,
    IsolatedJudge,
    SpareChildren,
)
from pytest_torchcompile.judging.isolation.process_setup import config_patches
from pytest_torchcompile.judging.isolation.protocol import (
    PROTOCOL_VERSION,
    ChildSetup,
    GraphToPrepare,
    JudgeSettings,
    Ready,
    StartFailed,
    Unjudged,
)
from pytest_torchcompile.judging.isolation.tasks import judge_candidate, kernel_source
from pytest_torchcompile.judging.judge import GraphVerdict
from pytest_torchcompile.minifying.repro_file import minify_repro
from pytest_torchcompile.minifying.search import minify_graph
from pytest_torchcompile.repros.repro import write_repro
from pytest_torchcompile.torch_internals.config import inductor_config_diff

aten = torch.ops.aten
RELU_BUG = "torch._inductor.config.cpp.inject_relu_bug_TESTING_ONLY = 'accuracy'"
SETTINGS = JudgeSettings()


def relu_graph() -> torch.fx.GraphModule:
    return make_fx(lambda x: (torch.relu(x),))(torch.randn(8))


def graph_calling(function: Callable[..., Any], *args: Any) -> torch.fx.GraphModule:
    """A graph whose eager run calls ``function(*args)`` before returning ``relu(x)``."""
    graph = torch.fx.Graph()
    value = graph.placeholder("x")
    graph.call_function(function, args)
    graph.output((graph.call_function(aten.relu.default, (value,)),))
    return torch.fx.GraphModule(torch.nn.Module(), graph)


def sin_relu_cos(x: torch.Tensor) -> tuple[torch.Tensor]:
    return (torch.cos(torch.relu(torch.sin(x))),)


def ops_of(gm: torch.fx.GraphModule) -> list[Any]:
    return [node.target for node in gm.graph.nodes if node.op == "call_function"]


# Verdict functions run in the child, which imports them from this module by name.


def aborts_on_a_lone_sin(
    settings: JudgeSettings, gm: torch.fx.GraphModule, inputs: list[Any]
) -> GraphVerdict:
    if ops_of(gm) == [aten.sin.default]:
        os.abort()
    return GraphVerdict(FailureKind.ACCURACY if aten.relu.default in ops_of(gm) else None)


def poisons_the_device(
    settings: JudgeSettings, gm: torch.fx.GraphModule, inputs: list[Any]
) -> GraphVerdict:
    return GraphVerdict(
        FailureKind.RUNTIME_ERROR,
        error=f"AcceleratorError: CUDA error: an illegal memory access (pid {os.getpid()})",
    )


def where_it_runs(
    settings: JudgeSettings, gm: torch.fx.GraphModule, inputs: list[Any]
) -> GraphVerdict:
    return GraphVerdict(None, error=f"{os.environ.get('CUDA_VISIBLE_DEVICES')} {inputs[0].device}")


@pytest.mark.slow
def test_crashing_candidates_cost_a_restart_and_the_config_survives_it() -> None:
    x = [torch.randn(8)]
    with IsolatedJudge(RELU_BUG) as judge:
        aborted = judge(graph_calling(os.abort), x, SETTINGS)
        segfaulted = judge(graph_calling(ctypes.string_at, 0), x, SETTINGS)
        judged = judge(relu_graph(), x, SETTINGS)

    assert aborted.failure == FailureKind.CRASHED and "SIGABRT" in (aborted.error or "")
    assert segfaulted.failure == FailureKind.CRASHED and "SIGSEGV" in (segfaulted.error or "")
    assert (
        judged.failure == FailureKind.ACCURACY
    )  # the injected relu bug: the third child got the config too
    assert judge.restarts == 2


def test_a_hanging_candidate_times_out_and_the_next_one_is_judged() -> None:
    x = [torch.randn(8)]
    with IsolatedJudge(candidate_timeout_s=5) as judge:
        started = time.perf_counter()
        hung = judge(graph_calling(time.sleep, 600), x, SETTINGS)
        waited = time.perf_counter() - started
        # Judged without compiling: a fresh child's first compile may outlast a 5 s timeout.
        judged = judge(
            make_fx(lambda v: (torch.mm(v, v),))(torch.randn(3, 3)), x, SETTINGS
        )  # x is 1-d

    assert hung.failure == FailureKind.TIMED_OUT and waited < 60
    assert judged.failure == FailureKind.EAGER_ERROR and "matrix" in (judged.error or "")
    assert judge.restarts == 1


def test_minifying_survives_a_candidate_that_kills_the_child() -> None:
    case = ReproCase(
        make_fx(sin_relu_cos)(torch.randn(8)), [torch.randn(8)], FailureKind.ACCURACY, "crashing"
    )
    with IsolatedJudge(verdict_function=aborts_on_a_lone_sin) as judge:
        reduction = minify_graph(case, functools.partial(judge, settings=SETTINGS))

    assert reduction.gm is not None and reduction.stop is StopReason.MINIMAL
    assert ops_of(reduction.gm) == [aten.relu.default]
    assert judge.restarts == 1


def test_a_poisoned_device_gets_a_fresh_child() -> None:
    x = [torch.randn(8)]
    with IsolatedJudge(verdict_function=poisons_the_device) as judge:
        first = judge(relu_graph(), x, SETTINGS)
        second = judge(relu_graph(), x, SETTINGS)

    assert first.failure == second.failure == FailureKind.RUNTIME_ERROR
    assert first.error != second.error and judge.restarts == 1  # another pid


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_a_child_that_cannot_start_ends_the_minification_with_a_note(tmp_path: Path) -> None:
    case = ReproCase(
        relu_graph(), [torch.randn(8)], FailureKind.ACCURACY, "no gpu", config_source=RELU_BUG
    )
    repro = write_repro(case, tmp_path / "repro.py")

    result = minify_repro(repro, device="cuda:0")

    assert (
        result.path is None
        and "failed to start" in result.note
        and "no CUDA device 0" in result.note
    )


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_the_chosen_gpu_is_the_only_one_the_child_sees() -> None:
    index = torch.cuda.device_count() - 1
    with IsolatedJudge(device=f"cuda:{index}", verdict_function=where_it_runs) as judge:
        verdict = judge(relu_graph().cuda(), [torch.randn(8, device=f"cuda:{index}")], SETTINGS)

    assert verdict.error == f"{index} cuda:0"


def test_config_lines_become_patches_that_are_undone() -> None:
    source = "\n".join(
        [
            "import os.path",
            RELU_BUG,
            "torch._inductor.config.post_grad_custom_post_pass = os.path.join",
            "torch._inductor.config.debug = True",
        ]
    )
    patches = {
        "cpp.inject_relu_bug_TESTING_ONLY": "accuracy",
        "post_grad_custom_post_pass": os.path.join,
        "debug": True,
    }

    assert config_patches(source) == patches
    with InProcessJudge(source):
        inside = inductor_config_diff()
    after = inductor_config_diff()
    assert (
        inside["cpp.inject_relu_bug_TESTING_ONLY"],
        inside["post_grad_custom_post_pass"],
        inside["debug"],
    ) == ("accuracy", repr(os.path.join), True)
    # Undone: back at the defaults (a restored value may still be listed, with its default).
    assert (
        after.get("cpp.inject_relu_bug_TESTING_ONLY"),
        after.get("post_grad_custom_post_pass"),
        after.get("debug", False),
    ) == (None, None, False)
    with pytest.raises(ValueError, match="not an Inductor config assignment"):
        config_patches("torch._inductor.config.debug")


def judged_by(settings: JudgeSettings, gm: torch.fx.GraphModule, inputs: list[Any]) -> GraphVerdict:
    return GraphVerdict(
        None, error=f"pid {os.getpid()} threads {os.environ.get('OMP_NUM_THREADS')}"
    )


def test_a_prestarted_child_with_other_thread_counts_is_replaced(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    spares = SpareChildren()
    spares.prestart(RELU_BUG, verdict_function=judged_by)
    spare = next(iter(spares._waiting.values()))
    monkeypatch.setenv("OMP_NUM_THREADS", "2")  # the minify phase shares the CPUs out anew
    with IsolatedJudge(RELU_BUG, verdict_function=judged_by, spares=spares) as judge:
        verdict = judge(relu_graph(), [torch.randn(8)], SETTINGS)
    assert verdict.error is not None and verdict.error.endswith("threads 2")
    assert str(spare.process.pid) not in verdict.error and spare.process.poll() is not None


def judged_by_config(
    settings: JudgeSettings, gm: torch.fx.GraphModule, inputs: list[Any]
) -> GraphVerdict:
    import torch._inductor.config as inductor

    return GraphVerdict(
        None,
        error=f"pid {os.getpid()} threads {os.environ.get('OMP_NUM_THREADS')} "
        f"relu bug {inductor.cpp.inject_relu_bug_TESTING_ONLY}",
    )


@pytest.mark.parametrize(
    "prestart",
    [
        pytest.param(
            lambda spares: spares.prestart(RELU_BUG, verdict_function=judged_by_config),
            id="with-its-setup",
        ),
        # Before any case is known: the first judge of its device sends the setup.
        pytest.param(lambda spares: spares.prestart_unset(), id="setup-sent-on-adoption"),
    ],
)
def test_a_prestarted_child_judges_the_cases_first_candidate(
    monkeypatch: pytest.MonkeyPatch, prestart: Callable[[SpareChildren], None]
) -> None:
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    spares = SpareChildren()
    prestart(spares)
    spare = next(iter(spares._waiting.values()))
    with IsolatedJudge(RELU_BUG, verdict_function=judged_by_config, spares=spares) as judge:
        verdict = judge(relu_graph(), [torch.randn(8)], SETTINGS)
    assert verdict.error == f"pid {spare.process.pid} threads 1 relu bug accuracy"
    assert judge.restarts == 0 and not spares
    assert spare.process.poll() is not None  # ended with the judge


def test_a_child_started_before_its_case_is_kept_from_judges_of_other_devices() -> None:
    spares = SpareChildren()
    spares.prestart_unset("cuda:0")
    try:
        assert spares.adopt(parent._child_setup("", judged_by, None), None) is None
        assert len(spares) == 1, "still waiting for a judge of its device"
    finally:
        spares.close()
    assert not spares


def test_one_prestarted_child_waits_at_a_time() -> None:
    spares = SpareChildren()
    spares.prestart(RELU_BUG, verdict_function=judged_by)
    spares.prestart("", verdict_function=judged_by)
    spares.prestart_unset()
    try:
        assert len(spares) == 1
    finally:
        spares.close()
    assert not spares


def column_sums(x):  # unannotated: fx cannot pickle a graph whose code names a string annotation
    return (x.sum(0),)


@pytest.mark.slow
def test_cpu_graphs_carry_the_threads_their_cpp_was_generated_for() -> None:
    """Inductor generates other C++ for one thread (no OpenMP loop) than for two: a graph captured
    in a process limited to one thread (an xdist worker on two cores) records the count, so that a
    judging child with more threads, and a repro run alone, compile the code the test ran."""
    x = torch.randn(4096, 256)
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        outcome = check_model(column_sums, (x,))
        torch.set_num_threads(2)
        with_two = kernel_source(make_fx(column_sums)(x), [x], SETTINGS)
    finally:
        torch.set_num_threads(threads)
    config = outcome.graphs[0].config_source
    assert "torch._inductor.config.cpp.threads = 1" in config.splitlines()
    assert with_two is not None and "omp parallel" in with_two

    with budget.children_limited(2), IsolatedJudge(config) as judge:
        in_child = judge.kernel_source(make_fx(column_sums)(x), [x], SETTINGS)
    assert in_child is not None and "omp parallel" not in in_child

    pinned = check_model(
        column_sums, (x,), options=CheckOptions(inductor_config={"cpp.threads": 2})
    )
    assert [
        line for line in pinned.graphs[0].config_source.splitlines() if "cpp.threads" in line
    ] == ["torch._inductor.config.cpp.threads = 2"]


def test_a_judge_forgets_a_prepared_graph_when_its_child_does(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(parent, "PREPARED_KEPT", 1)
    x = torch.randn(8)
    with IsolatedJudge(RELU_BUG) as judge:
        for key in (1, 2):
            judge.prepare(relu_graph(), GraphToPrepare(key, RELU_BUG, [input_spec(x)]))
        forgotten = judge.judge_prepared(1, [x], SETTINGS)
        kept = judge.judge_prepared(2, [x], SETTINGS)
    assert forgotten.failure == FailureKind.JUDGE_ERROR and "NotPrepared" in (forgotten.error or "")
    assert kept.failure == FailureKind.ACCURACY


ROUTING_IN_A_FRESH_PROCESS = """
import torch._inductor.lowering
from torch._inductor.codegen.triton import TritonKernelOverrides
from pytest_torchcompile.torch_internals.fingerprint import compiler_fingerprint

module = "torch._inductor.codegen.triton"
before = compiler_fingerprint([module])[module]
overrides = dict(vars(TritonKernelOverrides))
TritonKernelOverrides._setup_libdevice_routing()
routed = [name for name, member in vars(TritonKernelOverrides).items() if overrides.get(name) is not member]
assert routed, "no override was routed"
assert compiler_fingerprint([module])[module] == before, routed
"""


def test_inductors_own_triton_routing_is_not_foreign_compiler_code() -> None:
    """Inductor wraps some Triton overrides at its first Triton kernel: a test process that
    compiled for a GPU before its probe child did is not told that its compiler differs."""
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-c", ROUTING_IN_A_FRESH_PROCESS], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr[-2000:]


def test_a_judge_hands_its_started_child_to_the_next_judge_of_its_setup() -> None:
    """The child that confirmed a case judges its candidates next: one child's start, not two."""
    spares = SpareChildren()
    with IsolatedJudge(RELU_BUG, verdict_function=judged_by) as confirming:
        first = confirming(relu_graph(), [torch.randn(8)], SETTINGS)
        assert confirming.hand_over(spares) and len(spares) == 1
        assert not confirming.hand_over(SpareChildren()), "nothing left to give"
        with IsolatedJudge(RELU_BUG, verdict_function=judged_by, spares=spares) as minifying:
            assert minifying(relu_graph(), [torch.randn(8)], SETTINGS).error == first.error
            assert minifying.restarts == 0 and not spares
        again = confirming(relu_graph(), [torch.randn(8)], SETTINGS)
    assert again.error != first.error and confirming.restarts == 1


def test_a_judge_keeps_its_child_where_a_spare_already_waits() -> None:
    spares = SpareChildren()
    spares.prestart(RELU_BUG, verdict_function=judged_by)
    try:
        with IsolatedJudge(RELU_BUG, verdict_function=judged_by) as judge:
            first = judge(relu_graph(), [torch.randn(8)], SETTINGS)
            assert not judge.hand_over(spares)
            assert judge(relu_graph(), [torch.randn(8)], SETTINGS).error == first.error
    finally:
        spares.close()


def _child_of(setup: ChildSetup, tmp_path: Path) -> parent._Child:
    return parent._spawn_child(setup, None, tmp_path / "child.log")


def test_a_child_of_another_protocol_version_refuses_to_start(tmp_path: Path) -> None:
    child = _child_of(
        ChildSetup("", judge_candidate, False, version=PROTOCOL_VERSION + 1), tmp_path
    )
    try:
        started = child.replies.recv()
    finally:
        child.process.kill()
        child.process.wait()
    assert isinstance(started, StartFailed) and "ProtocolMismatch" in started.error


def test_a_request_the_child_cannot_read_is_answered_as_an_error_not_judged(tmp_path: Path) -> None:
    child = _child_of(ChildSetup("", judge_candidate, False), tmp_path)
    try:
        assert isinstance(child.replies.recv(), Ready)
        child.requests.send(Ready())  # a reply, sent as a request
        answer = child.replies.recv()
    finally:
        child.process.kill()
        child.process.wait()
    assert isinstance(answer, Unjudged) and answer.verdict.failure is FailureKind.JUDGE_ERROR
    assert (answer.verdict.error or "").startswith("UnknownRequest: Ready")


def test_a_child_is_not_killed_while_its_cpu_probes_build(tmp_path: Path) -> None:
    """Its probes' builds go into the shared Inductor cache: one cut short would leave a broken
    library there, read by every later compile as an unusable ISA."""
    requests_read, requests_write = os.pipe()
    replies_read, replies_write = os.pipe()
    for descriptor in (requests_read, replies_write):
        os.close(descriptor)
    process = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True
    )
    log = tmp_path / "child.log"
    marker = parent._probe_marker(log)
    marker.touch()
    child = parent._Child(
        process,
        Connection(requests_write, readable=False),
        Connection(replies_read, writable=False),
        log,
        (),
    )
    threading.Timer(0.5, marker.unlink).start()
    started = time.monotonic()
    parent._end(child)
    assert time.monotonic() - started >= 0.5, "killed while the marker was there"
    assert process.poll() is not None
