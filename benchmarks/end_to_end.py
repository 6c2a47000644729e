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

import dataclasses
import pstats
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
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
        compile_accuracy(model, x{fixture_config})
""",
    "plain": """

{marker}def test_anchor():
    torch.manual_seed(0)
    model = M().eval().to(DEVICE)
    x = torch.randn(16, 32, device=DEVICE)
    with torch.no_grad():
        torch.compile(model)(x)
""",
    "floor": """

def test_anchor():
    import torch._inductor.config

{floor_knob}    torch.manual_seed(0)
    model = M().eval().to(DEVICE)
    x = torch.randn(16, 32, device=DEVICE)
    with torch.no_grad():
        torch.compile(model)(x)
""",
}
"""The test of each path (the fixture's call, a plain ``torch.compile`` call) and the floor's: the
plain path's test run without the plugin."""

FORMS = {
    "marker": {
        "fixture_config": ', inductor_config={{"{knob}.inject_relu_bug_TESTING_ONLY": "accuracy"}}',
        "marker": '@pytest.mark.inductor_repro(inductor_config={{"{knob}.inject_relu_bug_TESTING_ONLY": "accuracy"}})\n',
        "floor_knob": '    torch._inductor.config.{knob}.inject_relu_bug_TESTING_ONLY = "accuracy"\n',
    },
    "installed": {"fixture_config": "", "marker": "", "floor_knob": ""},
}
"""How the bug reaches the compile: set by the test (the fixture's ``inductor_config``, the plain
test's marker, the floor's own line), or installed (:data:`INSTALLED`): present in every process
of the run as a bug of the installed compiler is, the plugin told nothing."""

INSTALLED = """\
\"\"\"The anchor's bug as the installed compiler has it: set in Inductor's config as it loads, in
every process that imports it (pytest, its children, a repro run by hand, compile workers).\"\"\"
import importlib.abc
import sys


class _Bugged(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name != "torch._inductor.config":
            return None
        spec = next(
            found
            for finder in sys.meta_path
            if finder is not self and hasattr(finder, "find_spec")
            and (found := finder.find_spec(name, path, target)) is not None
        )
        run = spec.loader.exec_module

        def exec_module(module):
            run(module)
            module.{knob}.inject_relu_bug_TESTING_ONLY = "accuracy"

        spec.loader.exec_module = exec_module
        return spec


sys.meta_path.insert(0, _Bugged())
"""


def install_bug(workdir: Path, knob: str) -> Path:
    """A folder whose ``sitecustomize.py`` installs the anchor's bug (:data:`INSTALLED`)."""
    site = workdir / "site-installed-bug"
    site.mkdir()
    (site / "sitecustomize.py").write_text(INSTALLED.format(knob=knob))
    return site


def test_module(path: str, form: str, layers: int, bug_at: int, anchor: Path, device: str) -> str:
    """The test module of ``path`` (a path's, or ``"floor"``) with the bug in ``form``."""
    knob = "triton" if device == "cuda" else "cpp"
    parts = {key: value.format(knob=knob) for key, value in FORMS[form].items()}
    return (HEADER + TESTS[path]).format(
        layers=layers, bug_at=bug_at, anchor=str(anchor), device=device, **parts
    )


def pytest_command(floor: bool, profile: Path | None = None) -> list[str]:
    """The pytest command of a contender (``profile``: where cProfile writes, for an untimed
    run)."""
    return [
        sys.executable,
        *(["-m", "cProfile", "-o", str(profile)] if profile else []),
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


def run_pytest(
    bench: Bench,
    module: str,
    floor: bool,
    name: str,
    cache_name: str | None = None,
    profile: Path | None = None,
) -> tuple[float, str]:
    """One pytest run of a test ``module`` (the floor's: ``floor``), in a project ``name`` of its
    own; ``cache_name``: the Inductor cache directory's name (default: the project's, a fresh
    one)."""
    project = bench.workdir / name
    project.mkdir()
    (project / "test_anchor.py").write_text(module)
    started = time.perf_counter()
    done = subprocess.run(
        pytest_command(floor, profile),
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


def where_seconds_go(profile: Path, top: int = 14) -> list[str]:
    """The plugin's functions that took the most time in a profiled run (cumulative seconds, the
    outermost ones first), with torch's import and Inductor's compile for scale."""
    stats = pstats.Stats(str(profile))
    rows = []
    for (filename, line, function), entry in stats.stats.items():  # type: ignore[attr-defined]
        cumulative = entry[3]
        if "pytest_torchcompile" in filename:
            where = filename.split("pytest_torchcompile/", 1)[-1]
            rows.append((cumulative, f"{where}:{line} {function}"))
        elif filename.endswith("torch/__init__.py") and function == "<module>":
            rows.append((cumulative, "import torch"))
        elif function == "compile_fx" and "_inductor" in filename:
            rows.append((cumulative, "Inductor compile_fx (all calls)"))
    rows.sort(reverse=True)
    return [f"  {seconds:7.2f} s  {name}" for seconds, name in rows[:top]]


PATHS = ("fixture", "plain")
TIMED = (*PATHS, "floor")
"""Whose medians are set against torch's: the two paths, and the floor."""


@dataclasses.dataclass(frozen=True)
class Contenders:
    """The contenders of one form of the bug, each run in a project and a cache of its own."""

    bench: Bench
    form: str
    anchor: Path
    layers: int
    bug_at: int

    def module(self, path: str) -> str:
        return test_module(
            path, self.form, self.layers, self.bug_at, self.anchor, self.bench.device
        )

    def ours(self, path: str, tag: str, warm: bool) -> tuple[float, str]:
        """A pytest run of ``path``'s test (or the floor's); warm: on the cache that ``path``'s
        earlier runs of this form left."""
        return run_pytest(
            self.bench,
            self.module(path),
            path == "floor",
            f"{self.form}-{path}-{tag}",
            cache_name=f"{self.form}-{path}-warm" if warm else None,
        )

    def theirs(self, tag: str, warm: bool) -> tuple[float, float, Run]:
        """Torch's detect and ``minify --no-isolate``: their total, the detection, the minify."""
        cache = f"{self.form}-torch-warm" if warm else None
        tag = f"-{self.form}{tag}"
        launcher, detect_s = torch_launcher(
            self.bench, self.anchor, self.layers, self.bug_at, tag=tag, cache_name=cache
        )
        minify = run_torch(self.bench, launcher, isolate=False, tag=tag, cache_name=cache)
        return detect_s + minify.seconds, detect_s, minify

    def profiled(self, path: str) -> list[str]:
        """Where the seconds of a cold run of ``path``'s test go (:func:`where_seconds_go`)."""
        profile = self.bench.workdir / f"{self.form}-{path}.prof"
        run_pytest(
            self.bench, self.module(path), False, f"{self.form}-{path}-profiled", profile=profile
        )
        return where_seconds_go(profile)


def race(contenders: Contenders, mode: str, repeats: int, say: Callable[[str], None]) -> list[str]:
    """``repeats`` rounds of every contender on caches of ``mode``; the lines of their medians."""
    warm = mode == "warm"
    form = contenders.form
    say(f"\nbug {form}, {mode} Inductor caches")
    if warm:
        warming = [f"{path} {contenders.ours(path, 'warming', True)[0]:.1f} s" for path in TIMED]
        total, _, _ = contenders.theirs("-warming", True)
        say(f"warming (untimed): {'; '.join(warming)}; torch {total:.1f} s")
    times: dict[str, list[float]] = {path: [] for path in (*TIMED, "torch")}
    for round_ in range(repeats):
        for path in TIMED:
            seconds, detail = contenders.ours(path, f"{mode}-{round_}", warm)
            times[path].append(seconds)
            what = "pytest without the plugin" if path == "floor" else "pytest -> minified.py"
            say(f"round {round_}, {path}: {what} {seconds:.1f} s ({detail})")
        total, detect_s, minify = contenders.theirs(f"-{mode}-{round_}", warm)
        times["torch"].append(total)
        say(
            f"round {round_}, torch: detect {detect_s:.1f} s + minify --no-isolate "
            f"{minify.seconds:.1f} s = {total:.1f} s ({minify.compiles} queries, {minify.detail})"
        )
    torch_s = statistics.median(times["torch"])
    floor_s = statistics.median(times["floor"])
    medians = []
    for path in TIMED:
        ours_s = statistics.median(times[path])
        medians.append(
            f"bug {form}, {mode}, {path}: {ours_s:.1f} s; / torch detect + minify --no-isolate "
            f"({torch_s:.1f} s) = {ours_s / torch_s:.2f}"
            + ("" if path == "floor" else f"; / floor = {ours_s / floor_s:.2f}")
        )
    return medians


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
    parser.add_argument(
        "--bug",
        default="installed,marker",
        help="installed (in every process, as a compiler's bug is), marker (set by the test), "
        "or both",
    )
    parser.add_argument(
        "--profile",
        action="store_true",
        help="also run each path once more under cProfile (untimed) and print where its seconds go",
    )
    args = parser.parse_args()
    caches = [mode.strip() for mode in args.caches.split(",") if mode.strip()]
    if not caches or set(caches) - {"cold", "warm"}:
        parser.error("--caches takes cold, warm or cold,warm")
    forms = [form.strip() for form in args.bug.split(",") if form.strip()]
    if not forms or set(forms) - set(FORMS):
        parser.error("--bug takes installed, marker or installed,marker")

    workdir = Path(tempfile.mkdtemp(prefix="end-to-end-"))
    bench = Bench(workdir, args.device, args.timeout, primed_caches=False)
    knob = "triton" if args.device == "cuda" else "cpp"
    report = Report()
    medians: list[str] = []
    try:
        for form in forms:
            site = install_bug(workdir, knob) if form == "installed" else None
            contenders = Contenders(
                dataclasses.replace(bench, site=site),
                form,
                args.anchor.resolve(),
                args.layers,
                args.bug_at,
            )
            for mode in caches:
                medians += race(contenders, mode, args.repeats, report.say)
            for path in PATHS if args.profile else ():
                report.say(f"\nbug {form}, {path}, cold, under cProfile: where the seconds go")
                for line in contenders.profiled(path):
                    report.say(line)
        report.say(
            f"\nanchor: {args.layers} layers, bug at {args.bug_at}, {args.device}; "
            f"medians of {args.repeats}"
        )
        for line in medians:
            report.say(line)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
        report.write(args.out)


if __name__ == "__main__":
    main()
