"""Does a suite of real-model checks get faster with more xdist workers? Side by side, one run.

A suite of compile-accuracy checks (inference; fp32, and bf16 with ``--dtypes fp32,bf16``) is
written to a scratch directory and run with ``pytest --compile-accuracy -n N`` for each N of
``--workers``, each run in a fresh process with a fresh ``TORCHINDUCTOR_CACHE_DIR``; the wall time
of each run, its tests' durations and its speedup over the first are printed. The models are ``benchmarks/zoo.py``'s (timm, torchvision, transformers built from
configs, random weights): those whose library is installed; on a CPU with ``--tiny`` shapes.
Without them (or with ``--small``) the suite is eight small models defined here, so that the
benchmark also runs on a CPU-only machine.

    # a GPU host: the nine zoo models, -n 1 against -n 4 (about 4 minutes on an H100)
    python benchmarks/xdist_scaling.py --device cuda --workers 1,4 --out xdist_scaling.txt
    # a 2-core CPU machine: the small suite, -n 0 against -n 2
    python benchmarks/xdist_scaling.py --device cpu --workers 0,2 --out xdist_scaling_cpu.txt

``--unbudgeted`` adds a run at the last N with ``--compile-accuracy-threads 0`` (every worker takes the
whole machine, as before the run had one CPU budget), to show what the budget buys.
``--suites checked,plain`` also runs the zoo models plainly (an eager call and the
``torch.compile`` first call, no plugin option) at each N: how far the host itself lets such a
suite scale, the bound for the checked one.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BENCHMARKS = ROOT / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))

from minify_vs_torch import Report  # noqa: E402

ZOO_SUITE = """\
import sys, pytest, torch
sys.path.insert(0, {benchmarks!r})
import zoo

DEVICE, TINY = torch.device({device!r}), {tiny!r}


@pytest.mark.parametrize("dtype", {dtypes!r})
@pytest.mark.parametrize("name", {names!r})
def test_model(compile_accuracy, name, dtype):
    spec = next(spec for spec in zoo.MODELS if spec.name == name)
    case = spec.build(zoo.Sizes(DEVICE, tiny=TINY))
    model, args, kwargs = zoo.prepare(case, zoo.DTYPES[dtype], "inference", DEVICE)
    with torch.no_grad():
        compile_accuracy.check(model, args, kwargs)
"""

PLAIN_ZOO_SUITE = """\
import sys, pytest, torch
sys.path.insert(0, {benchmarks!r})
import zoo

DEVICE, TINY = torch.device({device!r}), {tiny!r}


@pytest.mark.parametrize("dtype", {dtypes!r})
@pytest.mark.parametrize("name", {names!r})
def test_model(name, dtype):
    spec = next(spec for spec in zoo.MODELS if spec.name == name)
    case = spec.build(zoo.Sizes(DEVICE, tiny=TINY))
    model, args, kwargs = zoo.prepare(case, zoo.DTYPES[dtype], "inference", DEVICE)
    with torch.no_grad():
        model(*args, **kwargs)
        torch.compile(model)(*args, **kwargs)
"""

SMALL_SUITE = """\
import pytest, torch
from torch import nn

DEVICE = torch.device({device!r})


class Attention(nn.Module):
    def __init__(self, width=32, heads=4):
        super().__init__()
        self.qkv, self.out, self.heads = nn.Linear(width, 3 * width), nn.Linear(width, width), heads

    def forward(self, x):
        b, n, c = x.shape
        q, k, v = self.qkv(x).reshape(b, n, 3, self.heads, c // self.heads).permute(2, 0, 3, 1, 4)
        y = torch.softmax(q @ k.transpose(-1, -2) / (c // self.heads) ** 0.5, dim=-1) @ v
        return self.out(y.transpose(1, 2).reshape(b, n, c))


def conv_net(width):
    return nn.Sequential(nn.Conv2d(3, width, 3, padding=1), nn.BatchNorm2d(width), nn.ReLU(),
                         nn.Conv2d(width, width, 3, padding=1, groups=width), nn.BatchNorm2d(width), nn.GELU(),
                         nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(width, 10))


MODELS = {{
    "mlp_tanh": lambda: (nn.Sequential(*[m for _ in range(6) for m in (nn.Linear(64, 64), nn.Tanh())]), (16, 64)),
    "mlp_gelu_norm": lambda: (nn.Sequential(nn.Linear(64, 128), nn.GELU(), nn.LayerNorm(128), nn.Linear(128, 8)), (16, 64)),
    "conv_16": lambda: (conv_net(16), (2, 3, 16, 16)),
    "conv_24": lambda: (conv_net(24), (2, 3, 16, 16)),
    "attention": lambda: (Attention(), (2, 8, 32)),
    "attention_block": lambda: (nn.Sequential(nn.LayerNorm(32), Attention(), nn.LayerNorm(32), nn.Linear(32, 32)), (2, 8, 32)),
    "gru_like": lambda: (nn.Sequential(nn.Linear(32, 96), nn.Sigmoid(), nn.Linear(96, 32), nn.Tanh()), (8, 32)),
    "softmax_head": lambda: (nn.Sequential(nn.Linear(32, 64), nn.SiLU(), nn.Linear(64, 16), nn.Softmax(-1)), (8, 32)),
}}


@pytest.mark.parametrize("name", sorted(MODELS))
def test_model(compile_accuracy, name):
    torch.manual_seed(0)
    model, shape = MODELS[name]()
    with torch.no_grad():
        compile_accuracy(model.eval().to(DEVICE), torch.randn(*shape, device=DEVICE))
"""


def zoo_names() -> list[str]:
    """The zoo models whose library is installed."""
    import zoo

    return [spec.name for spec in zoo.MODELS if importlib.util.find_spec(spec.library) is not None]


def run_suite(
    project: Path, suite: str, workers: int, extra: list[str], timeout_s: float
) -> tuple[float, str, list[str]]:
    cache = Path(tempfile.mkdtemp(prefix="inductor-cache-", dir=project))
    env = {
        **os.environ,
        "TORCHINDUCTOR_CACHE_DIR": str(cache),
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
    }
    command = [
        sys.executable,
        "-m",
        "pytest",
        "-p",
        "no:cacheprovider",
        "-q",
        "-n",
        str(workers),
        "--durations=0",
        *extra,
        suite,
    ]
    started = time.perf_counter()
    done = subprocess.run(
        command, cwd=project, env=env, capture_output=True, text=True, timeout=timeout_s
    )
    seconds = time.perf_counter() - started
    shutil.rmtree(cache, ignore_errors=True)
    summary = re.findall(r"^=* ?(\d+ (?:passed|failed).*?)=*$", done.stdout, re.M)
    if done.returncode not in (0, 1):
        raise SystemExit(
            f"{' '.join(command)} exited {done.returncode}:\n{(done.stdout + done.stderr)[-4000:]}"
        )
    durations = re.findall(r"^\s*(\d+\.\d+s (?:setup|call|teardown) .*)$", done.stdout, re.M)
    return (
        seconds,
        (summary[-1].strip() if summary else done.stdout.strip().splitlines()[-1]),
        durations,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    parser.add_argument(
        "--workers",
        default=None,
        help="comma-separated -n values, the first is the anchor (default: 1,4 on cuda, 0,2 on cpu)",
    )
    parser.add_argument(
        "--small",
        action="store_true",
        help="the small models defined here, even with zoo libraries",
    )
    parser.add_argument(
        "--tiny", action="store_true", help="zoo models with tiny shapes (default on a CPU)"
    )
    parser.add_argument(
        "--dtypes", default="fp32", help="zoo models' dtypes, comma-separated: fp32, bf16"
    )
    parser.add_argument(
        "--unbudgeted",
        action="store_true",
        help="add a run at the last -n with --compile-accuracy-threads 0 (no shared CPU budget)",
    )
    parser.add_argument(
        "--suites",
        default="checked",
        help="comma-separated: checked (under --compile-accuracy), plain (the zoo models' "
        "plain torch.compile first call and an eager call, no check: what the host gives "
        "a suite without the plugin)",
    )
    parser.add_argument(
        "--timeout", type=float, default=1200.0, help="limit per pytest run, seconds"
    )
    parser.add_argument("--out", type=Path, help="also write the report to this file")
    args = parser.parse_args()
    counts = [
        int(n) for n in (args.workers or ("1,4" if args.device == "cuda" else "0,2")).split(",")
    ]

    names = [] if args.small else zoo_names()
    workdir = Path(tempfile.mkdtemp(prefix="xdist-scaling-"))
    report = Report()
    say = report.say

    try:
        if names:
            dtypes = args.dtypes.split(",")
            source = ZOO_SUITE.format(
                benchmarks=str(BENCHMARKS),
                device=args.device,
                tiny=args.tiny or args.device == "cpu",
                names=names,
                dtypes=dtypes,
            )
            say(
                f"suite: {len(names) * len(dtypes)} checks, zoo models ({', '.join(names)}) in "
                f"{' and '.join(dtypes)}, inference, on {args.device}"
            )
        else:
            source = SMALL_SUITE.format(device=args.device)
            say(
                f"suite: 8 small models defined in xdist_scaling.py, inference fp32, on {args.device}"
            )
        (workdir / "test_suite.py").write_text(source)
        say(
            f"{len(os.sched_getaffinity(0)) if hasattr(os, 'sched_getaffinity') else os.cpu_count()} CPUs; "
            f"each run a fresh process and a fresh Inductor cache"
        )
        suites = args.suites.split(",")
        checked = ["--compile-accuracy", "test_suite.py"]
        runs = [(f"-n {n}", n, checked) for n in counts] if "checked" in suites else []
        if args.unbudgeted:
            runs.append(
                (
                    f"-n {counts[-1]} --compile-accuracy-threads 0",
                    counts[-1],
                    ["--compile-accuracy-threads", "0", *checked],
                )
            )
        if "plain" in suites and names:
            (workdir / "test_plain.py").write_text(
                PLAIN_ZOO_SUITE.format(
                    benchmarks=str(BENCHMARKS),
                    device=args.device,
                    tiny=args.tiny or args.device == "cpu",
                    names=names,
                    dtypes=dtypes,
                )
            )
            runs += [(f"plain -n {n}", n, ["test_plain.py"]) for n in counts]
        results: dict[str, float] = {}
        for label, n, extra in runs:
            seconds, summary, durations = run_suite(workdir, extra[-1], n, extra[:-1], args.timeout)
            results[label] = seconds
            say(f"{label:32} {seconds:7.1f} s   {summary}")
            for line in durations:
                say(f"    {line}")
        say("")
        for label, seconds in results.items():
            first = f"plain -n {counts[0]}" if label.startswith("plain") else f"-n {counts[0]}"
            if label == first or first not in results:
                continue
            anchor_s = results[first]
            say(
                f"{label} vs {first}: {anchor_s / seconds:.2f}x faster"
                if seconds <= anchor_s
                else f"{label} vs {first}: {seconds / anchor_s:.2f}x slower"
            )
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
        report.write(args.out)


if __name__ == "__main__":
    main()
