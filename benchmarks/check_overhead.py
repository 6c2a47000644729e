"""What a check costs beside the plain run it checks.

Two measurements, each contender a fresh process on a fresh, empty Inductor cache, alternating:

* a fixture check (``check_model``) of a small conv + transformer-encoder model against its
  plain ``torch.compile(model)`` first call, with and without the masked-deviation probe
  (``intermediates``, on by default): the probe is the check's second compile of the graph;
* a file of tests that compile nothing, run plainly and under ``--compile-accuracy``: the
  session's one-time cost (the compiler imported at configure time) and the cost per test.

    python benchmarks/check_overhead.py --rounds 2
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

MODEL_RUN = textwrap.dedent("""
    import sys, time
    import torch
    import torch._inductor.config  # imported before the clock starts, as the plugin does at configure
    from pytest_torchcompile.check import CheckOptions, check_model

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

    torch.manual_seed(0)
    model, x = ConvEncoder().eval(), torch.randn(2, 3, 16, 16)
    mode = sys.argv[1]
    start = time.perf_counter()
    with torch.no_grad():
        if mode == "plain":
            torch.compile(model)(x)
        else:
            outcome = check_model(model, (x,), options=CheckOptions(intermediates=mode == "check"))
            assert outcome.status.value == "pass", (outcome.status, outcome.message)
    print(time.perf_counter() - start)
""")

TRIVIAL_TESTS = 400
MODES = {"plain": "plain torch.compile", "check": "check", "no-probe": "check without the probe"}


def _fresh_env(cache: Path) -> dict[str, str]:
    return {**os.environ, "TORCHINDUCTOR_CACHE_DIR": str(cache), "PYTHONDONTWRITEBYTECODE": "1"}


def _model_seconds(mode: str, work: Path) -> float:
    cache = Path(tempfile.mkdtemp(dir=work))
    done = subprocess.run([sys.executable, "-c", MODEL_RUN, mode], env=_fresh_env(cache),
                          capture_output=True, text=True, check=True)
    return float(done.stdout.strip().splitlines()[-1])


def _pytest_seconds(path: Path, plugin: bool, work: Path) -> float:
    cache = Path(tempfile.mkdtemp(dir=work))
    command = [sys.executable, "-m", "pytest", str(path), "-q", "-p", "no:cacheprovider", "-p", "no:xdist"]
    start = time.perf_counter()
    subprocess.run(command + (["--compile-accuracy"] if plugin else []), cwd=work, env=_fresh_env(cache),
                   capture_output=True, check=True)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as directory:
        work = Path(directory)
        one = work / "test_one.py"
        one.write_text("import torch\n\n\ndef test_one():\n    assert torch.ones(3).sum() == 3\n")
        many = work / "test_many.py"
        many.write_text("import torch\n" + "".join(
            f"\n\ndef test_{i}():\n    assert torch.ones(3).sum() == 3\n" for i in range(TRIVIAL_TESTS)))
        model: dict[str, list[float]] = {mode: [] for mode in MODES}
        suite: dict[tuple[str, bool], list[float]] = {}
        for _ in range(args.rounds):
            for mode in MODES:
                model[mode].append(_model_seconds(mode, work))
            for path in (one, many):
                for plugin in (False, True):
                    suite.setdefault((path.name, plugin), []).append(_pytest_seconds(path, plugin, work))
    median = {mode: statistics.median(times) for mode, times in model.items()}
    print(f"fixture check of a conv + transformer-encoder model, CPU, median of {args.rounds}:")
    for mode, seconds in median.items():
        print(f"  {MODES[mode]:<26} {seconds:6.1f} s  {seconds / median['plain']:.2f}x the plain first call")
    timed = {key: statistics.median(times) for key, times in suite.items()}
    print(f"tests that compile nothing, whole pytest process, median of {args.rounds}:")
    for plugin in (False, True):
        label = "--compile-accuracy" if plugin else "plain"
        per_test = (timed["test_many.py", plugin] - timed["test_one.py", plugin]) / (TRIVIAL_TESTS - 1)
        print(f"  {label:<20} 1 test {timed['test_one.py', plugin]:5.1f} s, {TRIVIAL_TESTS} tests "
              f"{timed['test_many.py', plugin]:5.1f} s, {per_test * 1000:.1f} ms per test")


if __name__ == "__main__":
    main()
