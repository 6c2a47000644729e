"""Parallel minification across xdist workers: minify-phase wall time with ``-n 1`` vs ``-n K``.

K failing cases, variants of the anchor model (benchmarks/anchor_model.py: a 12-layer MLP,
tanh after every layer but one, which has a relu that Inductor miscompiles through torch's own
testing knob), each with the buggy relu at a different layer, are generated into a temporary
directory and run under ``pytest --compile-accuracy`` twice: ``-n 1`` (one worker minifies all
K cases in turn) and ``-n K``. The minify phase is timed from the work queue's job files (first
claim to last finish), not from the total wall time, which also holds worker start-up and the
tests. Every run gets a fresh Inductor cache directory.

    python benchmarks/parallel_minify.py                  # K=2, CPU (cuda when visible)
    python benchmarks/parallel_minify.py --cases 4 --device cuda --repeat 2

Targets: a 2-core CPU with K=2: >= 1.6x; a 16-core single-GPU machine with K=4: >= 3x.
Measured (2026-11-21, 86 -> 1 ops, 3 compiles a case): 2 cores of an idle H200 host (taskset -c
0,1), K=2: 59.5 s -> 31.2 s, 1.91x (1.62x without the CPU share per minifier); 2 cores of an H100
host, K=2, median of 2 pairs: 87.7 s -> 47.4 s, 1.85x; one H200, 16
cores, K=4: 30.8 s -> 9.7 s, 3.17x; two H200s, K=4: 31.1 s -> 9.9 s, 3.16x, workers on
cuda:K mod 2; the 2-core development VM, shared with other jobs (load 5): 1.53x (median of 2).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Any

KEEP_QUEUE_CONFTEST = """
from pytest_torchcompile.minifying.coordinator import KEEP_QUEUE_KEY


def pytest_configure(config):
    config.stash[KEEP_QUEUE_KEY] = True  # its jobs' attempts and timings are read after the run
"""

SUITE = """
import pytest
import torch

DEVICE = {device!r}
LAYERS = {layers}
KNOB = "triton.inject_relu_bug_TESTING_ONLY" if DEVICE == "cuda" else "cpp.inject_relu_bug_TESTING_ONLY"


class M(torch.nn.Module):
    def __init__(self, bug_at, n=LAYERS):
        super().__init__()
        self.bug_at = bug_at
        self.layers = torch.nn.ModuleList(torch.nn.Linear(32, 32) for _ in range(n))
        self.norm = torch.nn.LayerNorm(32)

    def forward(self, x):
        for i, layer in enumerate(self.layers):
            x = layer(x)
            x = torch.tanh(x) if i != self.bug_at else torch.relu(x)
            x = x * 0.5 + x.sin()
        return self.norm(x).softmax(-1)


@pytest.mark.inductor_repro(inductor_config={{KNOB: "accuracy"}})
@pytest.mark.parametrize("bug_at", {bug_layers!r})
def test_anchor(compile_accuracy, bug_at, request):
    if DEVICE == "cuda":  # which GPU the test ran on, for the report
        worker = getattr(request.config, "workerinput", {{}}).get("workerid", "main")
        with open("test-devices.log", "a") as log:
            log.write(f"{{request.node.nodeid}} {{worker}} cuda:{{torch.cuda.current_device()}}\\n")
    torch.manual_seed(0)
    model = M(bug_at).eval().to(DEVICE)
    x = torch.randn(16, 32, device=DEVICE)
    with torch.no_grad():
        compile_accuracy(model, x)
"""


def bug_layers(cases: int, layers: int) -> list[int]:
    """``cases`` distinct layers spread over the model."""
    if cases > layers:
        raise SystemExit(f"--cases {cases} > --layers {layers}")
    return sorted({round((i + 0.5) * layers / cases - 0.5) for i in range(cases)})


def newest_queue(out: Path) -> Path:
    return max((out / ".queue").iterdir(), key=lambda p: (p / "run.json").stat().st_mtime)


def run_once(
    workdir: Path, workers: int, label: str, timeout_s: float, extra: list[str]
) -> dict[str, Any]:
    out = workdir / f"out-{label}"
    env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": str(workdir / f"inductor-cache-{label}")}
    command = [
        sys.executable,
        "-m",
        "pytest",
        "-n",
        str(workers),
        "--compile-accuracy",
        "--compile-accuracy-dir",
        str(out),
        "--compile-accuracy-minify-timeout",
        str(timeout_s),
        "-p",
        "no:cacheprovider",
        "-q",
        "-W",
        "ignore",
        *extra,
    ]
    started = time.perf_counter()
    run = subprocess.run(command, cwd=workdir, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - started
    from pytest_torchcompile.minifying.queue import DONE, WorkQueue, phase_seconds

    queue_dir = newest_queue(out)
    jobs = WorkQueue(queue_dir).jobs()
    lines = [line for line in run.stdout.splitlines() if line.startswith(("minified ", "minify "))]
    if not jobs or any(job["state"] != DONE for job in jobs):
        sys.stderr.write(run.stdout[-4000:] + run.stderr[-4000:])
        raise SystemExit(f"{label}: not every case was minified: {[job['state'] for job in jobs]}")
    return {
        "label": label,
        "workers": workers,
        "phase_s": phase_seconds(queue_dir),
        "wall_s": wall,
        "minifiers": sorted({a["worker"] for j in jobs for a in j["attempts"]}),
        "cases": [
            {
                "nodeid": j["nodeid"],
                "worker": j["attempts"][-1]["worker"],
                "seconds": j["finished"] - j["attempts"][-1]["claimed"],
                "device": j["attempts"][-1].get("device") or "-",
                "ops": f"{j['result']['ops_before']} -> {j['result']['ops_after']}",
                "compiles": j["result"]["compiles"],
            }
            for j in jobs
        ],
        "lines": lines,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--cases", type=int, default=2, help="K: failing cases, and workers of the parallel run"
    )
    parser.add_argument("--layers", type=int, default=12)
    parser.add_argument("--device", choices=["cpu", "cuda"], default=None)
    parser.add_argument("--repeat", type=int, default=1, help="pairs of runs; medians are reported")
    parser.add_argument(
        "--timeout", type=float, default=600.0, help="--compile-accuracy-minify-timeout per case"
    )
    parser.add_argument("--json", type=Path, default=None, help="also write the figures here")
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory")
    parser.add_argument("pytest_args", nargs="*", help="more pytest arguments (after --)")
    args = parser.parse_args(argv)
    if args.device is None:
        import torch

        args.device = "cuda" if torch.cuda.is_available() else "cpu"
    layers = bug_layers(args.cases, args.layers)
    workdir = Path(tempfile.mkdtemp(prefix="parallel-minify-"))
    (workdir / "pytest.ini").write_text("[pytest]\n")
    (workdir / "conftest.py").write_text(KEEP_QUEUE_CONFTEST)
    (workdir / "test_anchor.py").write_text(
        textwrap.dedent(SUITE.format(device=args.device, layers=args.layers, bug_layers=layers))
    )
    print(
        f"{args.cases} cases (relu bug at layers {layers} of {args.layers}), device {args.device}, "
        f"{os.cpu_count()} CPUs; work dir {workdir}",
        flush=True,
    )
    runs: dict[str, list[dict[str, Any]]] = {"n1": [], f"n{args.cases}": []}
    for repeat in range(args.repeat):
        for label, workers in (("n1", 1), (f"n{args.cases}", args.cases)):
            result = run_once(workdir, workers, f"{label}-{repeat}", args.timeout, args.pytest_args)
            runs[label].append(result)
            print(
                f"-n {workers}: minify phase {result['phase_s']:.1f} s (total wall {result['wall_s']:.1f} s), "
                f"minified by {', '.join(result['minifiers'])}",
                flush=True,
            )
            for case in result["cases"]:
                print(
                    f"    {case['nodeid']}: {case['ops']} ops, {case['compiles']} compiles, "
                    f"{case['seconds']:.1f} s on {case['worker']} (device {case['device']})",
                    flush=True,
                )
    devices_log = workdir / "test-devices.log"
    if devices_log.exists():
        print(
            "tests ran on:\n    " + "\n    ".join(sorted(set(devices_log.read_text().splitlines())))
        )
    serial = statistics.median(r["phase_s"] for r in runs["n1"])
    parallel = statistics.median(r["phase_s"] for r in runs[f"n{args.cases}"])
    print(
        f"minify phase: -n 1 {serial:.1f} s, -n {args.cases} {parallel:.1f} s: speedup {serial / parallel:.2f}x"
    )
    if args.json is not None:
        args.json.write_text(
            json.dumps(
                {
                    "cases": args.cases,
                    "device": args.device,
                    "cpus": os.cpu_count(),
                    "serial_s": serial,
                    "parallel_s": parallel,
                    "speedup": serial / parallel,
                    "runs": runs,
                },
                indent=1,
            )
        )
    if not args.keep:
        import shutil

        shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
