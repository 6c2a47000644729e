"""Time this package's minifier against torch's own on the anchor workload, side by side.

The anchor model (``benchmarks/anchor_model.py``: an MLP with one injected relu accuracy
bug) is compiled once through ``check_model`` to write this package's repro, and once as the anchor
script itself, with ``TORCHDYNAMO_REPRO_AFTER=aot`` / repro level 4, which writes torch's
``minifier_launcher.py``. Then every contender runs as its own process with a fresh
``TORCHINDUCTOR_CACHE_DIR``, so that none profits from another's compiled kernels:

- ``minify_repro`` (isolated: a warm child judges the candidates), and with ``isolate=False``;
- torch's launcher ``minify --no-isolate``, and ``minify`` (isolated, one process per query).

Usage: ``python benchmarks/minify_vs_torch.py [--layers 12] [--bug-at 7] [--device cpu|cuda]
[--skip-torch-isolated] [--anchor PATH] [--primed-caches]``. Wall times include each process's
start-up (Python and torch imports); on a shared machine, compare runs of one invocation only.
A fresh cache also makes every contender pay Inductor's one-time setup of a cache directory (CPU
feature probes: g++ test builds); ``--primed-caches`` pays it before the clock starts.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

ROOT = Path(__file__).resolve().parents[1]
ANCHOR = ROOT / "benchmarks" / "anchor_model.py"
"""The anchor workload, beside this script."""

sys.path.insert(0, str(ROOT))

from pytest_torchcompile.checking.model import check_model  # noqa: E402
from pytest_torchcompile.common.settings import CheckOptions  # noqa: E402
from pytest_torchcompile.judging.case import ReproCase  # noqa: E402
from pytest_torchcompile.repros.repro import write_repro  # noqa: E402


@dataclass
class Run:
    """One contender's run."""

    name: str
    seconds: float
    compiles: int | None
    ops_after: int | None
    detail: str = ""
    repro_lines: int | None = None
    """Lines of the minified repro file it wrote (ours: minified.py; torch's: repro.py)."""


def anchor_model(
    anchor: Path, layers: int, bug_at: int, device: str
) -> tuple[torch.nn.Module, torch.Tensor]:
    """The anchor script's model and input, built the way the script builds them.

    Only the script's model class is executed (it is read from the file), not its module body,
    which would compile the model under torch's minifier settings.
    """
    tree = ast.parse(anchor.read_text())
    model_class = next(
        node for node in tree.body if isinstance(node, ast.ClassDef) and node.name == "M"
    )
    namespace: dict[str, Any] = {"torch": torch, "LAYERS": layers, "BUG_AT": bug_at}
    exec(compile(ast.Module([model_class], type_ignores=[]), str(anchor), "exec"), namespace)
    torch.manual_seed(0)
    model = namespace["M"]().eval().to(device)
    return model, torch.randn(16, 32, device=device)


def write_anchor_repro(
    anchor: Path, layers: int, bug_at: int, device: str, directory: Path
) -> tuple[Path, int]:
    """This package's repro of the anchor graph; returns its path and op count."""
    model, x = anchor_model(anchor, layers, bug_at, device)
    knob = "triton" if device == "cuda" else "cpp"
    with torch.no_grad():
        outcome = check_model(
            model,
            (x,),
            options=CheckOptions(
                inductor_config={f"{knob}.inject_relu_bug_TESTING_ONLY": "accuracy"}
            ),
        )
    if not outcome.failing_graphs:
        raise SystemExit(
            f"the anchor model did not fail its check: {outcome.status} {outcome.message}"
        )
    failing = outcome.failing_graphs[0]
    case = ReproCase(
        failing.gm or failing.graph.gm,
        failing.inputs or [],
        "accuracy",
        f"anchor {layers} layers, bug at {bug_at}",
        config_source=failing.graph.config_source,
    )
    return write_repro(case, directory / "repro.py"), case.op_count


PRIME = (
    "import sys, torch, torch.fx; "
    "from pytest_torchcompile.torch_internals.graph_compile import compile_graph; "
    "graph = torch.fx.Graph(); x = graph.placeholder('x'); "
    "graph.output((graph.call_function(torch.ops.aten.add.Tensor, (x, 1.0)),)); "
    "compile_graph(torch.fx.GraphModule(torch.nn.Module(), graph), [torch.zeros(4, device=sys.argv[1])])"
)
"""One one-op compile: Inductor's one-time setup of a cache directory (the CPU feature probes,
g++ test builds taking seconds), and none of the anchor's kernels."""


@dataclass(frozen=True)
class Bench:
    """Where and how contenders run."""

    workdir: Path
    device: str
    timeout_s: float
    primed_caches: bool
    site: Path | None = None
    """A folder put first on every process's path (its ``sitecustomize.py`` runs at start-up):
    how a bug in the installed compiler reaches every process, children included."""

    def environment(self, cache_name: str) -> dict[str, str]:
        """A contender's environment: this checkout importable, a fresh Inductor cache of its own."""
        env = _environment()
        if self.site is not None:
            env["PYTHONPATH"] = f"{self.site}{os.pathsep}{env['PYTHONPATH']}"
        return {**env, "TORCHINDUCTOR_CACHE_DIR": str(self.workdir / f"cache-{cache_name}")}

    def timed(self, command: list[str], cwd: Path, cache_name: str) -> tuple[float, str]:
        """Run a contender with a fresh Inductor cache of its own; its wall time and its output."""
        env = self.environment(cache_name)
        if self.primed_caches:
            subprocess.run(
                [sys.executable, "-c", PRIME, self.device],
                env=env,
                check=True,
                capture_output=True,
                timeout=self.timeout_s,
            )
        started = time.perf_counter()
        done = subprocess.run(
            command, cwd=cwd, env=env, capture_output=True, text=True, timeout=self.timeout_s
        )
        seconds = time.perf_counter() - started
        output = done.stdout + done.stderr
        if done.returncode != 0:
            raise SystemExit(f"{' '.join(command)} failed ({done.returncode}):\n{output[-4000:]}")
        return seconds, output


def _environment() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + (
        os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else ""
    )
    for name in ("TORCHDYNAMO_REPRO_AFTER", "TORCHDYNAMO_REPRO_LEVEL"):
        env.pop(name, None)
    return env


def run_ours(bench: Bench, repro: Path, isolate: bool) -> Run:
    name = "pytest-torchcompile" + ("" if isolate else " (isolate=False)")
    copy = bench.workdir / ("ours-isolated" if isolate else "ours-in-process")
    shutil.copytree(repro.parent, copy)
    device = "cuda:0" if bench.device == "cuda" else None
    script = (
        "import dataclasses, json, sys; from pathlib import Path; "
        "from pytest_torchcompile.minifying.repro_file import minify_repro; "
        # Torch's minifier does not look for the stage of the failure: neither does this run.
        f"r = minify_repro(Path(sys.argv[1]), isolate={isolate}, device={device!r}, find_stage=False); "
        "print('RESULT ' + json.dumps(dataclasses.asdict(r)))"
    )
    seconds, output = bench.timed(
        [sys.executable, "-c", script, str(copy / "repro.py")], copy, copy.name
    )
    result = json.loads(
        next(line for line in output.splitlines() if line.startswith("RESULT "))[len("RESULT ") :]
    )
    lines = len(Path(result["path"]).read_text().splitlines()) if result.get("path") else None
    return Run(name, seconds, result["compiles"], result["ops_after"], result["note"], lines)


def torch_launcher(
    bench: Bench,
    anchor: Path,
    layers: int,
    bug_at: int,
    tag: str = "",
    cache_name: str | None = None,
) -> tuple[Path, float]:
    """Run the anchor script as published; return torch's minifier launcher and the detection time.
    ``cache_name``: the Inductor cache directory's name (default: a fresh one of its own)."""
    scratch = bench.workdir / f"torch-detect{tag}"
    scratch.mkdir()
    seconds, output = bench.timed(
        [sys.executable, str(anchor), bench.device, str(layers), str(bug_at)],
        scratch,
        cache_name or scratch.name,
    )
    if "NO FAILURE DETECTED" in output:
        raise SystemExit("torch's accuracy check did not detect the anchor's bug")
    return next(scratch.glob("torch_compile_debug/*/minifier/minifier_launcher.py")), seconds


def run_torch(
    bench: Bench, launcher: Path, isolate: bool, tag: str = "", cache_name: str | None = None
) -> Run:
    name = "torch minifier" + ("" if isolate else " --no-isolate")
    scratch = bench.workdir / (("torch-isolated" if isolate else "torch-no-isolate") + tag)
    scratch.mkdir()
    # The launcher pins the cache directory of the run that wrote it: give it this run's own.
    cache = bench.workdir / f"cache-{cache_name or scratch.name}"
    source = re.sub(
        r"^os\.environ\['TORCHINDUCTOR_CACHE_DIR'\] = .*$",
        f"os.environ['TORCHINDUCTOR_CACHE_DIR'] = {str(cache)!r}",
        launcher.read_text(),
        flags=re.M,
    )
    copy = scratch / "minifier_launcher.py"
    copy.write_text(source)
    command = [sys.executable, str(copy), "minify", *([] if isolate else ["--no-isolate"])]
    seconds, output = bench.timed(command, scratch, cache_name or scratch.name)
    queries = re.findall(r"Made (\d+) queries", output)
    checkpoints = re.findall(r"Writing checkpoint with (\d+) nodes", output)
    # Torch counts placeholders and the output node; its one-relu result is 3 nodes. It copies its
    # minimal repro to repro.py in the directory it runs in.
    minimal = scratch / "repro.py"
    return Run(
        name,
        seconds,
        int(queries[-1]) if queries else None,
        None,
        f"final graph: {checkpoints[-1]} nodes" if checkpoints else "",
        len(minimal.read_text().splitlines()) if minimal.is_file() else None,
    )


def report(runs: list[Run], ops_before: int, detect_s: float) -> None:
    ours = next(run for run in runs if run.name == "pytest-torchcompile")
    print(f"\nanchor graph: {ops_before} ops; torch's detection run: {detect_s:.1f} s\n")
    print(
        f"{'contender':40} {'wall s':>8} {'compiles':>9} {'ops after':>9} {'repro lines':>11}  ours vs it"
    )
    for run in runs:
        ratio = (
            ""
            if run is ours
            else f"{run.seconds / ours.seconds:.1f}x slower"
            if run.seconds >= ours.seconds
            else f"{ours.seconds / run.seconds:.1f}x faster"
        )
        compiles = "-" if run.compiles is None else str(run.compiles)
        ops = "-" if run.ops_after is None else str(run.ops_after)
        lines = "-" if run.repro_lines is None else str(run.repro_lines)
        print(f"{run.name:40} {run.seconds:8.1f} {compiles:>9} {ops:>9} {lines:>11}  {ratio}")
    for run in runs:
        if run.detail:
            print(f"  {run.name}: {run.detail}")


class Report:
    """Lines printed as they come and, at the end, written to a file when one is asked for."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def say(self, line: str) -> None:
        print(line, flush=True)
        self.lines.append(line)

    def write(self, path: Path | None) -> None:
        if path is not None:
            path.write_text("\n".join(self.lines) + "\n")


def anchor_arguments(description: str) -> argparse.ArgumentParser:
    """A parser with the anchor workload's arguments."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--layers", type=int, default=12)
    parser.add_argument("--bug-at", type=int, default=7)
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    parser.add_argument(
        "--anchor", type=Path, default=ANCHOR, help="the anchor script (default: %(default)s)"
    )
    return parser


def main() -> None:
    parser = anchor_arguments(__doc__.split("\n\n")[0])
    parser.add_argument(
        "--skip-torch-isolated",
        action="store_true",
        help="skip torch's isolated minify (one process per query: minutes)",
    )
    parser.add_argument(
        "--timeout", type=float, default=1800.0, help="limit per contender, seconds"
    )
    parser.add_argument(
        "--primed-caches",
        action="store_true",
        help="give each fresh cache Inductor's one-time setup first (untimed), so that "
        "the times show the minifiers' own work",
    )
    parser.add_argument("--keep", action="store_true", help="keep the scratch directory")
    args = parser.parse_args()
    anchor = args.anchor.resolve()  # contenders run in directories of their own

    workdir = Path(tempfile.mkdtemp(prefix="minify-vs-torch-"))
    bench = Bench(workdir, args.device, args.timeout, args.primed_caches)
    try:
        repro, ops_before = write_anchor_repro(
            anchor, args.layers, args.bug_at, args.device, workdir / "repro"
        )
        launcher, detect_s = torch_launcher(bench, anchor, args.layers, args.bug_at)
        runs = [
            run_ours(bench, repro, True),
            run_ours(bench, repro, False),
            run_torch(bench, launcher, False),
        ]
        if not args.skip_torch_isolated:
            runs.append(run_torch(bench, launcher, True))
        report(runs, ops_before, detect_s)
    finally:
        if args.keep:
            print(f"scratch directory kept: {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
