"""The parallel minify phase: the work queue across processes, and whole runs under xdist.

Where real minification is not the point, a conftest sets the phase's minifier (``MINIFIER_KEY``)
to a fake that copies the repro to ``minified.py``, logs the call and sleeps, and keeps the run's
queue to be read (``KEEP_QUEUE_KEY``).
"""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import torch
from inline import runpytest
from processes import run_together

from pytest_torchcompile.common.devices import device_index, parse_devices
from pytest_torchcompile.common.results import MinifyResult, StopReason
from pytest_torchcompile.common.run_state import MinifyJob
from pytest_torchcompile.judging.case import ReproCase
from pytest_torchcompile.minifying.queue import (
    CRASHED,
    DONE,
    MINIFYING,
    PENDING,
    RUNNING,
    Heartbeat,
    Identity,
    WorkQueue,
    drain,
    job_result,
)
from pytest_torchcompile.repros import repro

pytest_plugins = ["pytester"]

FAKE_MINIFIER = """
import os, time
from pathlib import Path
from pytest_torchcompile.minifying.coordinator import KEEP_QUEUE_KEY
from pytest_torchcompile.minifying.phase import MINIFIER_KEY
from pytest_torchcompile.common.files import atomic_write
from pytest_torchcompile.common.results import MinifyResult, StopReason


def pytest_configure(config):
    config.stash[MINIFIER_KEY] = minify
    config.stash[KEEP_QUEUE_KEY] = True


def minify(repro_path, *, timeout_s=300.0, progress=None, isolate=True, device=None):
    with open(os.environ["FAKE_MINIFY_LOG"], "a") as log:  # one short appended line: atomic
        log.write(f"{repro_path}\\t{os.getpid()}\\n")
    seconds = float(os.environ.get("FAKE_MINIFY_SLEEP", "0.5"))
    time.sleep(seconds)
    out = Path(repro_path).with_name("minified.py")
    atomic_write(out, Path(repro_path).read_bytes())
    # The seconds it sleeps, not those it took: a loaded machine must not change what it prints.
    return MinifyResult(ops_before=5, ops_after=1, seconds=seconds, compiles=3,
                        stop="minimal", path=str(out))
"""

SUITE = """
import pytest, torch


@pytest.mark.inductor_repro(inductor_config={{"cpp.inject_relu_bug_TESTING_ONLY": "accuracy"}})
@pytest.mark.parametrize("seed", range({cases}))
def test_mlp(compile_accuracy, seed):
    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
    compile_accuracy(model, torch.randn(4, 8))
"""


@pytest.fixture
def fake_minifier(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Install the fake minifier for the pytester run, which keeps its queue to be read; returns
    its call log."""
    pytester.makeconftest(FAKE_MINIFIER)
    log = pytester.path / "minify-calls.log"
    monkeypatch.setenv("FAKE_MINIFY_LOG", str(log))
    monkeypatch.setenv("FAKE_MINIFY_SLEEP", "1.0")
    return log


def queue_dirs(pytester: pytest.Pytester) -> list[Path]:
    return sorted((pytester.path / ".compile-accuracy" / ".queue").iterdir(), key=lambda p: p.name)


def read_jobs(queue_dir: Path) -> list[dict[str, Any]]:
    return WorkQueue(queue_dir).jobs()


def minified_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith(("minified ", "minify "))]


def calls(log: Path) -> list[str]:
    return [line.split("\t")[0] for line in log.read_text().splitlines()] if log.exists() else []


def op_counts(paths: list[Path]) -> list[int]:
    """Load repro files in a fresh interpreter (loading imports torch._dynamo, which pytester's
    sys.modules snapshot would later drop from this one)."""
    code = (
        "import sys; from pytest_torchcompile.repros.loading import load_repro; "
        "print(*[load_repro(p).case.op_count for p in sys.argv[1:]])"
    )
    run = subprocess.run(
        [sys.executable, "-c", code, *map(str, paths)], capture_output=True, text=True, timeout=300
    )
    assert run.returncode == 0, run.stderr
    return [int(n) for n in run.stdout.split()]


# --- whole runs ----------------------------------------------------------------------------


@pytest.mark.slow
def test_xdist_minifies_every_case_once_and_the_controller_reports_once(
    pytester: pytest.Pytester,
    fake_minifier: Path,
) -> None:
    pytester.makepyfile(test_model=SUITE.format(cases=3))
    result = runpytest(
        pytester,
        "-n",
        "2",
        "--compile-accuracy",
        "--compile-minify-workers",
        "2",
        "-p",
        "no:cacheprovider",
    )
    result.assert_outcomes(failed=3)
    lines = minified_lines(result.stdout.str())
    nodeids = [f"test_model.py::test_mlp[{seed}]" for seed in range(3)]
    assert sorted(lines) == sorted(
        f"minified {n}: 5 -> 1 ops in 1.0 s, 3 compiles" for n in nodeids
    )
    assert minified_lines(result.stderr.str()) == []
    (queue_dir,) = queue_dirs(pytester)
    jobs = read_jobs(queue_dir)
    assert sorted(job["nodeid"] for job in jobs) == nodeids
    assert all(job["state"] == DONE and len(job["attempts"]) == 1 for job in jobs)
    assert {job["found_by"] for job in jobs} <= {"gw0", "gw1"}
    assert sorted(calls(fake_minifier)) == sorted(job["repro_path"] for job in jobs)  # once each
    assert min(op_counts([Path(job["repro_path"]) for job in jobs])) >= 3
    for job in jobs:
        path = Path(job["repro_path"])
        assert (path.parent / "minified.py").read_bytes() == path.read_bytes()
        # the controller recorded the result: the summary names minified.py, relative to the rootdir
        result.stdout.fnmatch_lines(
            [
                f"      minified: .compile-accuracy/{job['case_id']}/minified.py",
                "      minify: 5 -> 1 ops, 1.0 s, 3 compiles",
            ]
        )


@pytest.mark.slow
def test_no_xdist_and_n0_behave_alike_and_ignore_earlier_runs(
    pytester: pytest.Pytester,
    fake_minifier: Path,
) -> None:
    pytester.makepyfile(test_model=SUITE.format(cases=2))
    # A pending job left by an earlier run in the same directory: not this run's to take.
    stale_dir = pytester.path / ".compile-accuracy" / ".queue" / "0-earlier-run"
    stale = WorkQueue(stale_dir)
    stale_repro = pytester.path / "stale_repro.py"
    stale_repro.write_text("# ops: 3\n")
    stale.enqueue(MinifyJob("stale", "test_old.py::test_old", str(stale_repro), 60.0), "gw5")
    outputs = []
    for flags in (["-p", "no:xdist"], ["-n", "0"]):
        before = set(queue_dirs(pytester))
        result = pytester.runpytest(*flags, "--compile-accuracy", "-p", "no:cacheprovider")
        result.assert_outcomes(failed=2)
        (queue_dir,) = set(queue_dirs(pytester)) - before
        jobs = read_jobs(queue_dir)
        outputs.append(
            (
                minified_lines(result.stdout.str()),
                [
                    (j["nodeid"], j["state"], j["found_by"], [a["worker"] for a in j["attempts"]])
                    for j in jobs
                ],
            )
        )
        assert [w["worker"] for w in WorkQueue(queue_dir).participants()] == ["main"]
    assert outputs[0] == outputs[1]
    assert outputs[0][0] == [
        f"minified test_model.py::test_mlp[{s}]: 5 -> 1 ops in 1.0 s, 3 compiles" for s in range(2)
    ]
    assert [job["state"] for job in stale.jobs()] == [PENDING]
    assert str(stale_repro) not in calls(fake_minifier)
    assert len(calls(fake_minifier)) == 4


@pytest.mark.parametrize(
    "plugins",
    [["-p", "no:xdist"], pytest.param(["-n", "2"], marks=pytest.mark.slow)],
    ids=["no-xdist", "xdist"],
)
def test_failures_the_baseline_expects_can_go_unminified(
    pytester: pytest.Pytester,
    fake_minifier: Path,
    plugins: list[str],
) -> None:
    pytester.makepyfile(test_model=SUITE.format(cases=2))
    (pytester.path / "baseline.txt").write_text(
        "test_model.py::test_mlp[0]\tfail_accuracy\tupstream bug\n"
    )
    result = runpytest(
        pytester,
        *plugins,
        "--compile-accuracy",
        "-p",
        "no:cacheprovider",
        "-rx",
        "--compile-accuracy-baseline",
        "baseline.txt",
        "--no-compile-minify-expected",
    )
    result.assert_outcomes(failed=1, xfailed=1)
    expected, new = (
        pytester.path / ".compile-accuracy" / f"test_model.py__test_mlp_{seed}" for seed in (0, 1)
    )
    assert calls(fake_minifier) == [str(new / "repro.py")]
    assert minified_lines(result.stdout.str()) == [
        "minified test_model.py::test_mlp[1]: 5 -> 1 ops in 1.0 s, 3 compiles"
    ]
    # The expected failure still has its repro, named in the xfail reason.
    result.stdout.fnmatch_lines(
        [
            f"XFAIL test_model.py::test_mlp[[]0[]] - *repro: {(expected / 'repro.py').relative_to(pytester.path)}"
        ]
    )
    assert not (expected / "minified.py").exists()


# --- the queue across processes -------------------------------------------------------------


def _context() -> Any:
    """Fresh processes started from a server that imported the package once (fork after torch
    threads ran is unsafe; spawning would import torch in every child)."""
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(["pytest_torchcompile.minifying.queue"])
    return context


def _participant(queue_dir: str, worker: str, behaviour: str, lease_s: float, cap: int) -> None:
    """A process of the minify phase: ``behaviour`` is ``die`` (os._exit while holding a job) or
    the seconds each job takes. Exits with the number of results it stored."""
    queue = WorkQueue(Path(queue_dir), lease_s=lease_s, poll_s=0.05)
    me = Identity(worker)
    queue.register(me, MINIFYING)
    beat = Heartbeat(queue, me).start()

    def run_job(job: dict[str, Any]) -> MinifyResult:
        if behaviour == "die":
            os._exit(3)
        time.sleep(float(behaviour))
        return MinifyResult(
            5, 1, float(behaviour), 2, StopReason.MINIMAL, path=f"minified-by-{worker}"
        )

    finished = drain(queue, me, run_job, cap)
    beat.stop()
    sys.exit(len(finished))


def _make_jobs(directory: Path, count: int, lease_s: float = 30.0) -> WorkQueue:
    queue = WorkQueue(directory / "queue", lease_s=lease_s, poll_s=0.05)
    for index in range(count):
        path = directory / f"case{index}" / "repro.py"
        path.parent.mkdir(parents=True)
        path.write_text(f"# ops: {10 + index}\n")
        queue.enqueue(MinifyJob(f"case{index}", f"test_x.py::test_{index}", str(path), 60.0), "gw0")
    return queue


def _wait_for(condition: Any, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def _start(
    queue: WorkQueue, worker: str, behaviour: str, lease_s: float = 30.0, cap: int = 0
) -> Any:
    process = _context().Process(
        target=_participant, args=(str(queue.directory), worker, behaviour, lease_s, cap)
    )
    process.start()
    return process


def test_job_of_a_killed_worker_is_finished_by_another(tmp_path: Path) -> None:
    queue = _make_jobs(tmp_path, 1)
    first = _start(queue, "gw0", "die")
    _wait_for(lambda: queue.jobs()[0]["state"] == RUNNING)
    second = _start(queue, "gw1", "0.1")  # waits: the job is running, its owner may still finish
    started = time.monotonic()
    first.join(30)
    second.join(30)
    assert (first.exitcode, second.exitcode) == (3, 1)
    assert time.monotonic() - started < 15, (
        "a dead pid is noticed at once, not after the 30 s lease"
    )
    (job,) = queue.jobs()
    assert job["state"] == DONE and job["crashes"] == 1
    assert [(a["worker"], a["outcome"]) for a in job["attempts"]] == [
        ("gw0", "owner died"),
        ("gw1", DONE),
    ]
    assert job["result"]["path"] == "minified-by-gw1"


def test_expired_lease_is_reclaimed_and_the_late_owner_drops_its_result(tmp_path: Path) -> None:
    queue = _make_jobs(tmp_path, 1, lease_s=1.0)
    stalled = _start(queue, "gw0", "2.0", lease_s=1.0)
    _wait_for(lambda: queue.jobs()[0]["state"] == RUNNING)
    os.kill(stalled.pid, signal.SIGSTOP)  # alive, but its heartbeat stops
    try:
        other = _start(queue, "gw1", "0.1", lease_s=1.0)
        _wait_for(lambda: queue.jobs()[0]["state"] == DONE)
    finally:
        os.kill(stalled.pid, signal.SIGCONT)
    other.join(30)
    stalled.join(30)
    assert (stalled.exitcode, other.exitcode) == (0, 1)
    (job,) = queue.jobs()
    assert [(a["worker"], a["outcome"]) for a in job["attempts"]] == [
        ("gw0", "owner died"),
        ("gw1", DONE),
    ]
    assert job["result"]["path"] == "minified-by-gw1"


def test_job_that_kills_its_worker_twice_is_marked_crashed(tmp_path: Path) -> None:
    queue = _make_jobs(tmp_path, 1)
    first = _start(queue, "gw0", "die")
    _wait_for(lambda: queue.jobs()[0]["state"] == RUNNING)
    second = _start(queue, "gw1", "die")
    first.join(30)
    second.join(30)
    assert (first.exitcode, second.exitcode) == (3, 3)
    me = Identity("controller")  # the controller's last sweep settles it
    queue.register(me, MINIFYING)
    assert drain(queue, me, lambda job: pytest.fail("a crashed job is not retried")) == []
    (job,) = queue.jobs()
    assert job["state"] == CRASHED and job["crashes"] == 2
    assert [a["worker"] for a in job["attempts"]] == ["gw0", "gw1"]
    assert (
        job_result(job)
        .summary_line(job["nodeid"])
        .startswith(
            "not minified test_x.py::test_0: the minifier crashed: the minifying worker died 2 times"
        )
    )
    kept = job_result(job)
    assert kept.path is None and kept.stop is StopReason.CRASHED
    assert job["repro_path"] in kept.note and Path(job["repro_path"]).exists()


@pytest.mark.parametrize("cap", [1, 2])
def test_minify_workers_caps_concurrency(tmp_path: Path, cap: int) -> None:
    queue = _make_jobs(tmp_path, 6)
    processes = [_start(queue, f"gw{i}", "0.4", cap=cap) for i in range(3)]
    for process in processes:
        process.join(60)
    assert sum(p.exitcode for p in processes) == 6
    jobs = queue.jobs()
    assert all(job["state"] == DONE and len(job["attempts"]) == 1 for job in jobs)
    edges = sorted(
        [(a["claimed"], 1) for j in jobs for a in j["attempts"]]
        + [(a["ended"], -1) for j in jobs for a in j["attempts"]]
    )
    running = peak = 0
    for _, step in edges:
        running += step
        peak = max(peak, running)
    assert peak == cap
    first = min(jobs, key=lambda j: j["attempts"][0]["claimed"])
    assert first["ops"] == 15, "largest job first"


def test_census_counts_live_testers_only(tmp_path: Path) -> None:
    queue = WorkQueue(tmp_path / "queue", lease_s=30.0)
    me, tester, dead = Identity("gw0"), Identity("gw1"), Identity("gw2", pid=2**22 + 12345)
    queue.register(me, MINIFYING)
    queue.register(tester, "testing")
    queue.register(dead, "testing")  # no such pid: crashed while running tests
    assert queue.census(me) == (0, 0, 1)
    old = time.time() - 60
    os.utime(queue.workers_dir / f"{tester.token}.json", (old, old))  # heartbeat stopped
    assert queue.census(me) == (0, 0, 0)


# --- repro writers ---------------------------------------------------------------------------


class _Model(torch.nn.Module):
    def __init__(self, seed: int) -> None:
        super().__init__()
        self.register_buffer("scale", torch.arange(64, dtype=torch.float32).reshape(8, 8) + seed)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x @ self.scale).sum(-1)


def _write_repros(root: str, index: int, all_written: Any) -> None:
    """One of eight writers (concurrent runs: each lives until all have written): a case of its
    own, two of a test id all writers share, and the one path all of them write."""
    case_of = {}
    for nodeid in (f"test_a.py::test_{index}", "test_same.py::test_x", "test_same.py::test_x"):
        gm = torch.fx.symbolic_trace(_Model(index))
        case = ReproCase(
            gm=gm,
            inputs=[torch.full((4, 8), float(index))],
            kind="accuracy",
            title=f"{nodeid} writer {index}",
        )
        path = repro.write_case(case, Path(root), repro.slugify(nodeid), f"writer {index}")
        case_of[path.parent.name] = index
        repro.write_repro(case, Path(root) / "shared" / "repro.py")
    (Path(root) / f"writer{index}.json").write_text(json.dumps(case_of))
    all_written.wait(120)


def test_eight_processes_write_repros_at_once(tmp_path: Path) -> None:
    root = tmp_path / "repros"
    assert run_together(_context(), _write_repros, [(str(root), i) for i in range(8)]) == [0] * 8
    claimed: dict[str, int] = {}
    for index in range(8):
        mine = json.loads((root / f"writer{index}.json").read_text())
        assert not set(mine) & set(claimed), "a case directory was handed out twice"
        claimed.update(mine)
    assert len(claimed) == 24
    assert sum(name.startswith("test_same.py__test_x") for name in claimed) == 16
    ops = ReproCase(torch.fx.symbolic_trace(_Model(0)), [], "accuracy", "").op_count
    for name, index in [*claimed.items(), ("shared", None)]:
        loaded = repro.load_repro(root / name / "repro.py")
        assert loaded.case.op_count == ops
        writer = index if index is not None else int(loaded.case.title.rsplit(" ", 1)[1])
        expected = _Model(writer)(torch.full((4, 8), float(writer)))
        assert torch.equal(loaded.module.Repro()(*loaded.case.inputs), expected)
    assert not list(root.rglob("*.tmp")), "no half-written temporary file left"


# --- devices -------------------------------------------------------------------------------


def test_worker_k_gets_device_k_mod_g() -> None:
    assert [device_index(f"gw{k}", [], 2) for k in range(5)] == [0, 1, 0, 1, 0]
    assert [device_index(f"gw{k}", [], 1) for k in range(3)] == [0, 0, 0]  # one GPU: shared
    assert [device_index(f"gw{k}", [2, 3], 4) for k in range(3)] == [2, 3, 2]
    assert device_index(None, [], 2) is None  # a single process keeps the current device
    assert device_index(None, [1, 0], 2) == 1
    assert device_index("gw3", [0, 1], 0) is None  # no CUDA
    assert parse_devices(" 0, 2 ") == [0, 2]
    for refused in ("cuda:0", "-1", ",,,"):
        with pytest.raises(ValueError):
            parse_devices(refused)
