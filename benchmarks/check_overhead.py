"""What a check costs beside the plain run it checks.

Two measurements, each contender a fresh process on a fresh, empty Inductor cache, alternating:

* a fixture check (``check_model``) of a small conv + transformer-encoder model against its
  plain ``torch.compile(model)`` first call, with and without the masked-deviation probe
  (``intermediates``, on by default): the probe is the check's second compile of the graph,
  made in a child while the check compiles the graph where the graph and the CPUs are large
  enough, and also timed compiled in the checking process (``PYTEST_TORCHCOMPILE_CONCURRENT_PROBE=0``);
* a file of tests that compile nothing, run without the plugin, with it installed but off, and
  under ``--compile-accuracy``: the session's one-time cost (the plugin's start, a probe child's
  launch) and the cost per test.

    python benchmarks/check_overhead.py --rounds 2
    python benchmarks/check_overhead.py --models "" --rounds 3               # tests that compile nothing only
    python benchmarks/check_overhead.py --device cuda --models resnet50,convnext_tiny --rounds 1 --no-trivial
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

BENCHMARKS = Path(__file__).resolve().parent

MODEL_RUN = textwrap.dedent("""
    import json, sys, time
    import torch
    import torch._inductor.config  # before the clock starts: both contenders' times leave its import out
    from pytest_torchcompile.judging import judge as standalone
    from pytest_torchcompile.checking.model import check_model
    from pytest_torchcompile.common.settings import CheckOptions

    class ConvEncoder(torch.nn.Module):
        def __init__(self):
            super().__init__()
            layers, channels = [], 3
            for width in (16, 32, 32, 64):
                layers += [torch.nn.Conv2d(channels, width, 3, padding=1), torch.nn.BatchNorm2d(width),
                           torch.nn.ReLU()]
                channels = width
            self.body = torch.nn.Sequential(*layers)
            self.encoder = torch.nn.TransformerEncoderLayer(64, 4, 128, batch_first=True, dropout=0.0)
            self.head = torch.nn.Linear(64, 10)

        def forward(self, x):
            tokens = self.body(x).flatten(2).transpose(1, 2).contiguous()
            return self.head(self.encoder(tokens).mean(1))

    mode, name, device = sys.argv[1], sys.argv[2], torch.device(sys.argv[3])
    torch.manual_seed(0)
    if name == "conv_encoder":
        model, args, kwargs = ConvEncoder(), (torch.randn(2, 3, 16, 16, device=device),), {}
    else:
        sys.path.insert(0, sys.argv[4])
        import zoo
        case = next(spec for spec in zoo.MODELS if spec.name == name).build(zoo.Sizes(device, tiny=device.type == "cpu"))
        model, args, kwargs = case.model, case.args, case.kwargs
    model = model.eval().to(device)
    if device.type == "cuda":
        torch.ones(1, device=device).sum().item()  # the CUDA context, which a plain run pays elsewhere too

    spent = {"probe compile": 0.0, "probe references": 0.0, "probe judges": 0, "waiting for the child's probe": 0.0}
    def timed(function, key):
        def wrapper(*a, **k):
            started = time.perf_counter()
            try:
                return function(*a, **k)
            finally:
                spent[key] += time.perf_counter() - started
        return wrapper
    from pytest_torchcompile.checking import masked as intermediates
    original_judge = intermediates.judge_graph
    def judge(*a, **k):
        spent["probe judges"] += 1
        standalone.compile_graph = timed(original_compile, "probe compile")
        standalone.reference_outputs = timed(original_references, "probe references")
        try:
            return original_judge(*a, **k)
        finally:
            standalone.compile_graph, standalone.reference_outputs = original_compile, original_references
    original_compile, original_references = standalone.compile_graph, standalone.reference_outputs
    intermediates.judge_graph = judge
    intermediates.PreparedProbe.verdict = timed(intermediates.PreparedProbe.verdict, "waiting for the child's probe")

    children = intermediates.ProbeChildren()  # as a run's CheckRunner holds them
    start = time.perf_counter()
    with torch.no_grad():
        if mode == "plain":
            torch.compile(model)(*args, **kwargs)
        else:
            outcome = check_model(model, args, kwargs, options=CheckOptions(intermediates=mode != "no-probe"),
                                  probe_children=children)
            assert outcome.status.value == "pass", (outcome.status, outcome.message)
            spent["check's compile and compiled run"] = outcome.compile_seconds
    if device.type == "cuda":
        torch.cuda.synchronize()
    print(json.dumps({"seconds": time.perf_counter() - start, **spent}))
    children.close()
""")

TRIVIAL_TESTS = 2000
MODES = {
    "plain": "plain torch.compile",
    "check": "check",
    "check-here": "check, probe compiled here",
    "no-probe": "check without the probe",
}


def _fresh_env(cache: Path) -> dict[str, str]:
    return {**os.environ, "TORCHINDUCTOR_CACHE_DIR": str(cache), "PYTHONDONTWRITEBYTECODE": "1"}


def _model_run(mode: str, model: str, device: str, work: Path) -> dict[str, float]:
    cache = Path(tempfile.mkdtemp(dir=work))
    env = _fresh_env(cache)
    if mode == "check-here":
        env["PYTEST_TORCHCOMPILE_CONCURRENT_PROBE"] = "0"
    done = subprocess.run(
        [sys.executable, "-c", MODEL_RUN, mode, model, device, str(BENCHMARKS)],
        env=env,
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        raise SystemExit(f"{model} ({mode}) failed:\n{done.stderr[-3000:]}")
    timings: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return timings


TRIVIAL_CONTENDERS = {
    "uninstalled": ["-p", "no:torchcompile"],
    "option off": [],
    "--compile-accuracy": ["--compile-accuracy"],
}
"""How a file of tests that compile nothing runs: without the plugin, with it installed but
off, and checked."""


def _pytest_seconds(path: Path, extra: list[str], work: Path) -> float:
    cache = Path(tempfile.mkdtemp(dir=work))
    command = [
        sys.executable,
        "-m",
        "pytest",
        str(path),
        "-q",
        "-p",
        "no:cacheprovider",
        "-p",
        "no:xdist",
        *extra,
    ]
    start = time.perf_counter()
    subprocess.run(command, cwd=work, env=_fresh_env(cache), capture_output=True, check=True)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    parser.add_argument(
        "--models",
        default="conv_encoder",
        help="comma-separated: conv_encoder (defined here) and benchmarks/zoo.py's names; "
        "empty: none",
    )
    parser.add_argument(
        "--no-trivial", action="store_true", help="skip the tests that compile nothing"
    )
    args = parser.parse_args()
    names = [name for name in args.models.split(",") if name]
    with tempfile.TemporaryDirectory() as directory:
        work = Path(directory)
        one = work / "test_one.py"
        one.write_text("import torch\n\n\ndef test_one():\n    assert torch.ones(3).sum() == 3\n")
        many = work / "test_many.py"
        many.write_text(
            "import torch\n"
            + "".join(
                f"\n\ndef test_{i}():\n    assert torch.ones(3).sum() == 3\n"
                for i in range(TRIVIAL_TESTS)
            )
        )
        runs: dict[tuple[str, str], list[dict[str, float]]] = {}
        suite: dict[tuple[str, str], list[float]] = {}
        for _ in range(args.rounds):
            for name in names:
                for mode in MODES:
                    run = _model_run(mode, name, args.device, work)
                    runs.setdefault((name, mode), []).append(run)
                    print(f"  {name}, {MODES[mode]}: {run['seconds']:.1f} s", flush=True)
            for path in () if args.no_trivial else (one, many):
                for contender, extra in TRIVIAL_CONTENDERS.items():
                    suite.setdefault((path.name, contender), []).append(
                        _pytest_seconds(path, extra, work)
                    )
    for name in names:
        median = {
            mode: statistics.median(run["seconds"] for run in runs[name, mode]) for mode in MODES
        }
        print(f"fixture check of {name}, {args.device}, median of {args.rounds}:")
        for mode, seconds in median.items():
            print(
                f"  {MODES[mode]:<26} {seconds:6.1f} s  {seconds / median['plain']:.2f}x the plain first call"
            )
        for mode in ("check", "check-here"):
            parts = {
                key: statistics.median(run[key] for run in runs[name, mode])
                for key in runs[name, mode][0]
                if key != "seconds"
            }
            print(
                f"    in the {MODES[mode]}: "
                + ", ".join(
                    f"{key} {value:.1f}" + ("" if key == "probe judges" else " s")
                    for key, value in parts.items()
                )
            )
    if not suite:
        return
    timed = {key: statistics.median(times) for key, times in suite.items()}
    print(f"tests that compile nothing, whole pytest process, median of {args.rounds}:")
    for contender in TRIVIAL_CONTENDERS:
        per_test = (timed["test_many.py", contender] - timed["test_one.py", contender]) / (
            TRIVIAL_TESTS - 1
        )
        print(
            f"  {contender:<20} 1 test {timed['test_one.py', contender]:5.2f} s, {TRIVIAL_TESTS} tests "
            f"{timed['test_many.py', contender]:5.2f} s, {per_test * 1000:.2f} ms per test"
        )


if __name__ == "__main__":
    main()
