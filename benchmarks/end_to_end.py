"""End to end, side by side: from the start of a test run to a minified repro on disk.

Contenders, each a fresh process with an Inductor cache (``TORCHINDUCTOR_CACHE_DIR``) of its own:

- ``pytest --compile-accuracy`` on one test of the anchor model (``benchmarks/anchor_model.py``),
  through each path a user writes: the ``compile_accuracy`` fixture, and a plain
  ``torch.compile`` call the plugin checks unchanged; each clock runs from the pytest command's
  start until it exits with ``minified.py`` written;
- torch's path: the anchor script with ``TORCHDYNAMO_REPRO_AFTER=aot`` / repro level 4 (detects the
  deviation, writes ``minifier_launcher.py``), then that launcher's ``minify --no-isolate``; its
  clock is the sum of both processes.

Beside them, the floor: the plain path's test under pytest without the plugin (``-p
no:torchcompile``: no check, no repro), the same compile of the same model, which no checking can
undercut.

Each round runs the contenders in turn; the ratios of the medians are printed. Cold caches: every run
a fresh cache. Warm caches: each contender timed on the cache an untimed run of it left (a
developer's local rerun). ``--caches`` picks which (both by default, cold first).

Usage: ``python benchmarks/end_to_end.py [--layers 12] [--bug-at 7] [--device cpu|cuda]
[--repeats 1] [--caches cold,warm] [--out LOG]``.
"""

from __future__ import annotations

import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from minify_vs_torch import (  # noqa: E402
    Bench,
    Report,
    Run,
    anchor_arguments,
    run_torch,
    torch_launcher,
)

HEADER = """\
import ast, pathlib, pytest, torch

LAYERS, BUG_AT, DEVICE = {layers}, {bug_at}, {device!r}
_tree = ast.parse(pathlib.Path({anchor!r}).read_text())
_model_class = next(n for n in _tree.body if isinstance(n, ast.ClassDef) and n.name == "M")
exec(compile(ast.Module([_model_class], type_ignores=[]), {anchor!r}, "exec"), globals())
"""
"""A test module's head: the anchor script's own model class (not its module body, which compiles
under torch's minifier settings)."""

TESTS = {
    "fixture": """

def test_anchor(compile_accuracy):
    torch.manual_seed(0)
    model = M().eval().to(DEVICE)
    x = torch.randn(16, 32, device=DEVICE)
    with torch.no_grad():
        compile_accuracy(model, x, inductor_config={{"{knob}.inject_relu_bug_TESTING_ONLY": "accuracy"}})
""",
    "plain": """

@pytest.mark.inductor_repro(inductor_config={{"{knob}.inject_relu_bug_TESTING_ONLY": "accuracy"}})
def test_anchor():
    torch.manual_seed(0)
    model = M().eval().to(DEVICE)
    x = torch.randn(16, 32, device=DEVICE)
    with torch.no_grad():
        torch.compile(model)(x)
""",
}
"""The test of each path: the fixture's call, and a plain ``torch.compile`` call."""

FLOOR = """

def test_anchor():
    import torch._inductor.config

    torch._inductor.config.{knob}.inject_relu_bug_TESTING_ONLY = "accuracy"
    torch.manual_seed(0)
    model = M().eval().to(DEVICE)
    x = torch.randn(16, 32, device=DEVICE)
    with torch.no_grad():
        torch.compile(model)(x)
"""
"""The floor's test: the plain path's, its config set as the marker would, run without the plugin."""


def run_pytest(
    bench: Bench,
    anchor: Path,
    layers: int,
    bug_at: int,
    path: str,
    name: str,
    cache_name: str | None = None,
) -> tuple[float, str]:
    """One pytest run of ``path``'s test (or the floor's, ``"floor"``), in a project ``name`` of
    its own; ``cache_name``: the Inductor cache directory's name (default: the project's, a fresh
    one)."""
    project = bench.workdir / name
    project.mkdir()
    knob = "triton" if bench.device == "cuda" else "cpp"
    floor = path == "floor"
    (project / "test_anchor.py").write_text(
        (HEADER + (FLOOR if floor else TESTS[path])).format(
            layers=layers, bug_at=bug_at, anchor=str(anchor), device=bench.device, knob=knob
        )
    )
    command = [
        sys.executable,
        "-m",
        "pytest",
        *(["-p", "no:torchcompile"] if floor else ["--compile-accuracy"]),
        "-p",
        "no:cacheprovider",
        "-p",
        "no:xdist",
        "-q",
        "--durations=1",
        "test_anchor.py",
    ]
    started = time.perf_counter()
    done = subprocess.run(
        command,
        cwd=project,
        env=bench.environment(cache_name or project.name),
        capture_output=True,
        text=True,
        timeout=bench.timeout_s,
    )
    seconds = time.perf_counter() - started
    output = done.stdout + done.stderr
    if floor:
        if done.returncode != 0:
            raise SystemExit(
                f"the floor's test did not pass ({done.returncode}):\n{output[-4000:]}"
            )
        call = re.search(r"^([\d.]+)s call", output, re.M)
        return seconds, f"test call {call.group(1)} s" if call else ""
    if not list(project.glob(".compile-accuracy/*/minified.py")):
        raise SystemExit(f"pytest wrote no minified.py ({done.returncode}):\n{output[-4000:]}")
    minified = re.search(r"^minified .*$", output, re.M)
    call = re.search(r"^([\d.]+)s call", output, re.M)
    detail = (f"test call {call.group(1)} s; " if call else "") + (
        minified.group(0) if minified else ""
    )
    return seconds, detail


PATHS = ("fixture", "plain")
TIMED = (*PATHS, "floor")
"""Whose medians are set against torch's: the two paths, and the floor."""


def main() -> None:
    parser = anchor_arguments(__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=1, help="rounds of the contenders, in turn")
    parser.add_argument("--timeout", type=float, default=900.0, help="limit per process, seconds")
    parser.add_argument("--out", type=Path, help="also write the report to this file")
    parser.add_argument(
        "--caches",
        default="cold,warm",
        help="cold (every run a fresh Inductor cache), warm (the cache an untimed run of the same "
        "contender left), or both",
    )
    args = parser.parse_args()
    anchor = args.anchor.resolve()
    caches = [mode.strip() for mode in args.caches.split(",") if mode.strip()]
    if not caches or set(caches) - {"cold", "warm"}:
        parser.error("--caches takes cold, warm or cold,warm")

    workdir = Path(tempfile.mkdtemp(prefix="end-to-end-"))
    bench = Bench(workdir, args.device, args.timeout, primed_caches=False)
    report = Report()
    say = report.say
    medians: list[str] = []

    def ours(path: str, tag: str, warm: bool) -> tuple[float, str]:
        return run_pytest(
            bench,
            anchor,
            args.layers,
            args.bug_at,
            path,
            f"pytest-{path}-{tag}",
            cache_name=f"{path}-warm" if warm else None,
        )

    def theirs(tag: str, warm: bool) -> tuple[float, float, Run]:
        cache = "torch-warm" if warm else None
        launcher, detect_s = torch_launcher(
            bench, anchor, args.layers, args.bug_at, tag=tag, cache_name=cache
        )
        minify = run_torch(bench, launcher, isolate=False, tag=tag, cache_name=cache)
        return detect_s + minify.seconds, detect_s, minify

    try:
        for mode in caches:
            warm = mode == "warm"
            say(f"\n{mode} Inductor caches")
            if warm:
                warming = [f"{path} {ours(path, 'warming', True)[0]:.1f} s" for path in TIMED]
                total, _, _ = theirs("-warming", True)
                say(f"warming (untimed): {'; '.join(warming)}; torch {total:.1f} s")
            times: dict[str, list[float]] = {path: [] for path in (*TIMED, "torch")}
            for round_ in range(args.repeats):
                for path in PATHS:
                    seconds, detail = ours(path, f"{mode}-{round_}", warm)
                    times[path].append(seconds)
                    say(f"round {round_}, {path}: pytest -> minified.py {seconds:.1f} s ({detail})")
                seconds, detail = ours("floor", f"{mode}-{round_}", warm)
                times["floor"].append(seconds)
                say(f"round {round_}, floor: pytest without the plugin {seconds:.1f} s ({detail})")
                total, detect_s, minify = theirs(f"-{mode}-{round_}", warm)
                times["torch"].append(total)
                say(
                    f"round {round_}, torch: detect {detect_s:.1f} s + minify --no-isolate "
                    f"{minify.seconds:.1f} s = {total:.1f} s ({minify.compiles} queries, {minify.detail})"
                )
            torch_s = statistics.median(times["torch"])
            for path in TIMED:
                ours_s = statistics.median(times[path])
                medians.append(
                    f"{mode}, {path}: {ours_s:.1f} s; torch detect + minify --no-isolate "
                    f"{torch_s:.1f} s; {path} / torch = {ours_s / torch_s:.2f}"
                )
        say(
            f"\nanchor: {args.layers} layers, bug at {args.bug_at}, {args.device}; "
            f"medians of {args.repeats}"
        )
        for line in medians:
            say(line)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
        report.write(args.out)


if __name__ == "__main__":
    main()
