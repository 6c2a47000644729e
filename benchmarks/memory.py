"""Peak resident memory of a checked run beside the same test run plainly.

Each side is a fresh pytest process on a fresh, empty Inductor cache, running one test of a
file written for the model. The plain side is the test that calls ``torch.compile(model)(x)``, run
without ``--compile-accuracy``; the checked sides run with it:

* ``fixture``: the test that calls ``compile_accuracy(model, x)`` instead;
* ``plain``: the same ``torch.compile`` test (marked ``inductor_repro``), its graphs judged.

Two figures per side, both of the pytest process and every process it starts (the probe's and
judging children): the peak of their summed resident memory (``VmRSS`` of the process tree, read
from ``/proc`` every few milliseconds), and the largest single process's peak (``ru_maxrss`` of
``wait4``, exact: the pytest process's and those of the children it waited for). Ratios are the
checked side's over the plain side's.

    python benchmarks/memory.py                                  # both models, both paths
    python benchmarks/memory.py --models mlp --paths fixture
    python benchmarks/memory.py --models mlp --address-space 3   # the checked side under a 3 GiB RLIMIT_AS
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from dataclasses import dataclass
from pathlib import Path

MODELS = {
    "mlp": (
        "30 x Linear(2048, 2048)",
        "torch.nn.Sequential(*[layer for _ in range(30) for layer in (torch.nn.Linear(2048, 2048), "
        "torch.nn.ReLU())])",
        "torch.randn(8, 2048)",
    ),
    "convs": (
        "31 convolutions, 512 channels",
        "torch.nn.Sequential(torch.nn.Conv2d(3, 512, 3, padding=1), *[layer for _ in range(30) for layer "
        "in (torch.nn.ReLU(), torch.nn.Conv2d(512, 512, 3, padding=1))])",
        "torch.randn(1, 3, 16, 16)",
    ),
}

TEST_FILE = textwrap.dedent("""
    import pytest
    import torch


    def build():
        torch.manual_seed(0)
        return ({model}).eval(), {inputs}


    def test_fixture(compile_accuracy):
        model, x = build()
        compile_accuracy(model, x)


    @pytest.mark.inductor_repro
    def test_plain():
        model, x = build()
        with torch.no_grad():
            torch.compile(model)(x)
""")

PATHS = {"fixture": "checked (fixture)", "plain": "checked (plain torch.compile)"}


@dataclass
class Peak:
    tree_bytes: int
    """The peak of the summed VmRSS of the process tree, sampled."""
    largest_bytes: int
    """The largest single process's peak RSS (wait4's ru_maxrss)."""
    output: str


def _tree(root: int) -> list[int]:
    """``root`` and its live descendants."""
    pids, index = [root], 0
    while index < len(pids):
        try:
            for task in os.listdir(f"/proc/{pids[index]}/task"):
                with open(f"/proc/{pids[index]}/task/{task}/children") as children:
                    pids += [int(pid) for pid in children.read().split()]
        except OSError:  # the process ended while it was read
            pass
        index += 1
    return pids


def _resident(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def _limited(address_space: int | None) -> None:
    if address_space is not None:
        resource.setrlimit(resource.RLIMIT_AS, (address_space, address_space))


def _measure(command: list[str], work: Path, address_space: int | None) -> Peak:
    cache = Path(tempfile.mkdtemp(dir=work))
    env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": str(cache), "PYTHONDONTWRITEBYTECODE": "1"}
    log = work / "pytest.log"
    with log.open("w") as out:
        process = subprocess.Popen(
            command,
            cwd=work,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            preexec_fn=lambda: _limited(address_space),
        )
        tree_peak = 0
        done = threading.Event()

        def sample() -> None:
            nonlocal tree_peak
            while not done.is_set():
                tree_peak = max(tree_peak, sum(_resident(pid) for pid in _tree(process.pid)))
                time.sleep(0.005)

        sampler = threading.Thread(target=sample)
        sampler.start()
        # wait4 rather than Popen.wait: it gives this child's own resource usage, which includes
        # the peaks of the processes it waited for.
        _, _, usage = os.wait4(process.pid, 0)
        done.set()
        sampler.join()
        process.returncode = 0
    return Peak(tree_peak, usage.ru_maxrss * 1024, log.read_text())


def _tell_failure(name: str, side: str, peak: Peak) -> None:
    if " passed" not in peak.output.splitlines()[-1]:
        print(f"{name} ({side}) did not pass:\n{peak.output[-3000:]}")


def _gb(size: int) -> str:
    return f"{size / 1e9:.2f} GB"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--models", default=",".join(MODELS), help=f"comma-separated, of {', '.join(MODELS)}"
    )
    parser.add_argument(
        "--paths", default=",".join(PATHS), help=f"comma-separated, of {', '.join(PATHS)}"
    )
    parser.add_argument(
        "--address-space",
        type=float,
        default=None,
        metavar="GIB",
        help="run the checked side under this RLIMIT_AS, and print its outcome",
    )
    args = parser.parse_args()
    limit = int(args.address_space * 2**30) if args.address_space else None
    print(
        f"load: {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} {os.getloadavg()[2]:.2f}; "
        "tree: summed VmRSS of pytest and its children, sampled; largest: one process's "
        "ru_maxrss",
        flush=True,
    )
    with tempfile.TemporaryDirectory() as directory:
        work = Path(directory)
        for name in args.models.split(","):
            title, model, inputs = MODELS[name]
            test = work / f"test_{name}.py"
            test.write_text(TEST_FILE.format(model=model, inputs=inputs))
            command = [
                sys.executable,
                "-m",
                "pytest",
                "-q",
                "-p",
                "no:cacheprovider",
                "-p",
                "no:xdist",
            ]
            plain = _measure([*command, f"{test}::test_plain"], work, None)
            _tell_failure(name, "plain", plain)
            print(
                f"{title}: plain run, tree {_gb(plain.tree_bytes)}, largest {_gb(plain.largest_bytes)}"
            )
            for path in args.paths.split(","):
                checked = _measure(
                    [
                        *command,
                        f"{test}::test_{path}",
                        "--compile-accuracy",
                        f"--compile-accuracy-dir={work / 'repros'}",
                    ],
                    work,
                    limit,
                )
                _tell_failure(name, PATHS[path], checked)
                print(
                    f"  {PATHS[path]}: tree {_gb(checked.tree_bytes)} "
                    f"({checked.tree_bytes / plain.tree_bytes:.2f}x), largest {_gb(checked.largest_bytes)} "
                    f"({checked.largest_bytes / plain.largest_bytes:.2f}x)",
                    flush=True,
                )
                if limit is not None:
                    lines = [
                        line
                        for line in checked.output.splitlines()
                        if "memory" in line or "fp64" in line
                    ]
                    print(
                        "  under the limit: "
                        + ("; ".join(lines[-3:]) or checked.output.splitlines()[-1])
                    )


if __name__ == "__main__":
    main()
