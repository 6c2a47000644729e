"""End to end, side by side: from the start of a test run to a minified repro on disk.

Contenders, each a fresh process with a fresh ``TORCHINDUCTOR_CACHE_DIR`` of its own:

- ``pytest --compile-accuracy`` on one test that checks the anchor model
  (``benchmarks/anchor_model.py``) through the ``compile_accuracy`` fixture: its clock runs
  from the pytest command's start until it exits with ``minified.py`` written;
- torch's path: the anchor script with ``TORCHDYNAMO_REPRO_AFTER=aot`` / repro level 4 (detects the
  deviation, writes ``minifier_launcher.py``), then that launcher's ``minify --no-isolate``; its
  clock is the sum of both processes.

The contenders run alternately ``--repeats`` times; the ratio of the medians is printed. With
``--warm``, each timed run finds a warm Inductor cache: the same contender ran once before, untimed,
with the same cache directory (a developer's local rerun).

Usage: ``python benchmarks/end_to_end.py [--layers 12] [--bug-at 7] [--device cpu|cuda]
[--repeats 1] [--warm] [--out LOG]``.
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

from minify_vs_torch import Bench, Report, anchor_arguments, run_torch, torch_launcher  # noqa: E402

TEST_FILE = """\
import ast, pathlib, torch

LAYERS, BUG_AT, DEVICE = {layers}, {bug_at}, {device!r}
_tree = ast.parse(pathlib.Path({anchor!r}).read_text())
_model_class = next(n for n in _tree.body if isinstance(n, ast.ClassDef) and n.name == "M")
exec(compile(ast.Module([_model_class], type_ignores=[]), {anchor!r}, "exec"), globals())


def test_anchor(compile_accuracy):
    torch.manual_seed(0)
    model = M().eval().to(DEVICE)
    x = torch.randn(16, 32, device=DEVICE)
    with torch.no_grad():
        compile_accuracy(model, x, inductor_config={{"{knob}.inject_relu_bug_TESTING_ONLY": "accuracy"}})
"""
"""A test of the anchor model, built from the anchor script's own class (not its module body,
which compiles under torch's minifier settings)."""


def run_pytest(
    bench: Bench, anchor: Path, layers: int, bug_at: int, round_: int, cache_name: str | None = None
) -> tuple[float, str]:
    """One pytest run, in a project of its own; ``cache_name``: the Inductor cache directory's
    name (default: the project's, a fresh one)."""
    project = bench.workdir / f"pytest-{round_}"
    project.mkdir()
    knob = "triton" if bench.device == "cuda" else "cpp"
    (project / "test_anchor.py").write_text(
        TEST_FILE.format(
            layers=layers, bug_at=bug_at, anchor=str(anchor), device=bench.device, knob=knob
        )
    )
    command = [
        sys.executable,
        "-m",
        "pytest",
        "--compile-accuracy",
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
    if not list(project.glob(".compile-accuracy/*/minified.py")):
        raise SystemExit(f"pytest wrote no minified.py ({done.returncode}):\n{output[-4000:]}")
    minified = re.search(r"^minified .*$", output, re.M)
    call = re.search(r"^([\d.]+)s call", output, re.M)
    detail = (f"test call {call.group(1)} s; " if call else "") + (
        minified.group(0) if minified else ""
    )
    return seconds, detail


def main() -> None:
    parser = anchor_arguments(__doc__.split("\n\n")[0])
    parser.add_argument(
        "--repeats", type=int, default=1, help="rounds of both contenders, alternating"
    )
    parser.add_argument("--timeout", type=float, default=900.0, help="limit per process, seconds")
    parser.add_argument("--out", type=Path, help="also write the report to this file")
    parser.add_argument(
        "--warm",
        action="store_true",
        help="time each contender on the Inductor cache an untimed run of it left",
    )
    args = parser.parse_args()
    anchor = args.anchor.resolve()

    workdir = Path(tempfile.mkdtemp(prefix="end-to-end-"))
    bench = Bench(workdir, args.device, args.timeout, primed_caches=False)
    report = Report()
    say = report.say

    ours: list[float] = []
    theirs: list[float] = []
    try:
        if args.warm:
            seconds, _ = run_pytest(
                bench, anchor, args.layers, args.bug_at, -1, cache_name="ours-warm"
            )
            launcher, detect_s = torch_launcher(
                bench, anchor, args.layers, args.bug_at, tag="-warming", cache_name="torch-warm"
            )
            minify = run_torch(
                bench, launcher, isolate=False, tag="-warming", cache_name="torch-warm"
            )
            say(f"warming (untimed): ours {seconds:.1f} s; torch {detect_s + minify.seconds:.1f} s")
        for round_ in range(args.repeats):
            seconds, detail = run_pytest(
                bench,
                anchor,
                args.layers,
                args.bug_at,
                round_,
                cache_name="ours-warm" if args.warm else None,
            )
            ours.append(seconds)
            say(
                f"round {round_}: pytest --compile-accuracy -> minified.py: {seconds:.1f} s ({detail})"
            )
            launcher, detect_s = torch_launcher(
                bench,
                anchor,
                args.layers,
                args.bug_at,
                tag=str(round_),
                cache_name="torch-warm" if args.warm else None,
            )
            minify = run_torch(
                bench,
                launcher,
                isolate=False,
                tag=str(round_),
                cache_name="torch-warm" if args.warm else None,
            )
            theirs.append(detect_s + minify.seconds)
            say(
                f"round {round_}: torch detect {detect_s:.1f} s + minify --no-isolate {minify.seconds:.1f} s "
                f"= {detect_s + minify.seconds:.1f} s ({minify.compiles} queries, {minify.detail})"
            )
        ours_s, theirs_s = statistics.median(ours), statistics.median(theirs)
        say(
            f"\nanchor: {args.layers} layers, bug at {args.bug_at}, {args.device}; medians of {args.repeats}; "
            + ("warm Inductor caches" if args.warm else "cold Inductor caches")
        )
        say(
            f"pytest-torchcompile end to end {ours_s:.1f} s; torch detect + minify --no-isolate {theirs_s:.1f} s; "
            f"ours / torch = {ours_s / theirs_s:.2f}"
        )
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
        report.write(args.out)


if __name__ == "__main__":
    main()
