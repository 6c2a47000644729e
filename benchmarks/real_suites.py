"""Run third-party test suites as they are, plainly and under ``--compile-accuracy``.

Downloads pinned PyPI sdists (which ship their tests), installs each suite's dependencies, the
plugin (editable, from this checkout) and the CPU torch pin into a virtual environment of its own,
runs a subset of each suite that exercises ``torch.compile`` plainly and with the plugin (serially,
then under ``-n N``), and prints per suite: tests, outcomes both ways, graphs judged, false alarms
and wall time both ways.

A false alarm is a test that passes plainly but fails under ``--compile-accuracy``. The exit status
is 1 when one appears, 2 when a suite cannot be downloaded, installed or collected, else 0.

    python benchmarks/real_suites.py [--cache DIR] [--suites e3nn,einops,roma] [--workers 2]

Downloads and the environment are cached under ``--cache`` (default ``$REAL_SUITES_CACHE`` or
``/tmp/pytest-torchcompile-real-suites``), so reruns start in seconds. Only the standard library is
needed to start it.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tarfile
import time
import venv
import xml.etree.ElementTree as ET
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Suite:
    """A PyPI project whose sdist ships tests, and the subset of them that compiles."""

    name: str
    version: str
    tests: tuple[str, ...]
    """Test paths (relative to the unpacked sdist) and pytest options that pick the subset."""
    extra_requirements: tuple[str, ...] = ()
    """Packages the tests import beyond the project's own dependencies."""
    env: dict[str, str] = field(default_factory=dict)
    """Variables the suite's tests need."""
    drop: tuple[str, ...] = ()
    """Files of the unpacked sdist removed before its tests run."""

    @property
    def sdist_dir(self) -> str:
        return f"{self.name}-{self.version}"


SUITES = {
    suite.name: suite
    for suite in (
        Suite(
            "e3nn",
            "0.6.0",
            (
                "tests/math/soft_one_hot_test.py",
                "tests/nn/extract_test.py",
                "tests/nn/gate_test.py",
                "tests/nn/activation_test.py",
                "tests/o3/experimental/test_elementwise_tp.py",
                "-k",
                "float32",
            ),
        ),
        Suite(
            "einops",
            "0.8.2",
            ("einops/tests/test_other.py", "einops/tests/test_ops.py"),
            extra_requirements=("numpy",),
            # einops' tests refuse to run without naming the frameworks to test.
            env={"EINOPS_TEST_BACKENDS": "torch"},
        ),
        Suite(
            "roma",
            "1.8.0",
            # Its torch.compile tests; one compiles with Inductor (a jvp of an SVD-based
            # procrustes), the others with aot_eager, which the plugin leaves alone.
            ("test/", "-k", "compile"),
            extra_requirements=("numpy",),
            # The sdist ships its repository root's __init__.py, which makes pytest import the
            # tests as a package that cannot import itself.
            drop=("__init__.py",),
        ),
    )
}

# Keep the suites' own output out of the way; failures are read from JUnit XML.
PYTEST_QUIET = ("-q", "-p", "no:cacheprovider", "-W", "ignore::DeprecationWarning")


class SetupError(Exception):
    """A suite could not be downloaded, installed or collected."""


def run(command: list[str], *, cwd: Path | None = None, env: dict[str, str] | None = None) -> None:
    print("+", " ".join(command), flush=True)
    done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise SetupError(
            f"{' '.join(command)} exited {done.returncode}:\n{done.stdout[-3000:]}{done.stderr[-3000:]}"
        )


def environment(cache: Path, suites: list[Suite]) -> Path:
    """The virtual environment's python, with the plugin, the suites and their dependencies."""
    env_dir = cache / "venv"
    python = env_dir / "bin" / "python"
    if not python.exists():
        venv.create(env_dir, with_pip=True)
    sdists = cache / "sdists"
    sources = cache / "src"
    sources.mkdir(parents=True, exist_ok=True)
    for suite in suites:
        archive = sdists / f"{suite.sdist_dir}.tar.gz"
        if not archive.exists():
            run(
                [
                    str(python),
                    "-m",
                    "pip",
                    "download",
                    "-q",
                    "--no-deps",
                    "--no-binary",
                    ":all:",
                    f"{suite.name}=={suite.version}",
                    "-d",
                    str(sdists),
                ]
            )
        if not archive.exists():
            raise SetupError(f"pip download left no {archive.name} in {sdists}")
        if not (sources / suite.sdist_dir).exists():
            with tarfile.open(archive) as tar:
                tar.extractall(sources, filter="data")
        for name in suite.drop:
            (sources / suite.sdist_dir / name).unlink(missing_ok=True)
    # One pip call, so that the CPU torch pin holds for every dependency at once.
    requirements = ["-e", str(REPO)]
    for suite in suites:
        requirements += [str(sources / suite.sdist_dir), *suite.extra_requirements]
    run(
        [
            str(python),
            "-m",
            "pip",
            "install",
            "-q",
            "-c",
            str(REPO / "constraints.txt"),
            *requirements,
        ]
    )
    return python


@dataclass
class Outcome:
    """One pytest run of a suite's subset."""

    seconds: float
    exit_code: int
    results: dict[str, tuple[str, str]]
    """Test id -> (outcome, first line of the failure message)."""
    report: dict | None = None

    def counts(self) -> Counter[str]:
        return Counter(outcome for outcome, _ in self.results.values())


def junit_results(path: Path) -> dict[str, tuple[str, str]]:
    results: dict[str, tuple[str, str]] = {}
    if not path.exists():
        return results
    for case in ET.parse(path).iter("testcase"):
        test_id = f"{case.get('classname')}::{case.get('name')}"
        outcome, message = "passed", ""
        for child in case:
            if child.tag in ("failure", "error", "skipped"):
                outcome = {"failure": "failed", "error": "error", "skipped": "skipped"}[child.tag]
                if child.get("type") == "pytest.xfail":
                    outcome = "xfailed"
                lines = (child.get("message") or child.text or "").strip().splitlines()
                message = lines[0] if lines else ""
                break
        # A test failing in teardown has two entries; the worst one counts.
        if test_id not in results or outcome in ("failed", "error"):
            results[test_id] = (outcome, message)
    return results


def run_subset(
    python: Path, suite: Suite, source: Path, out: Path, label: str, options: list[str]
) -> Outcome:
    junit = out / f"{suite.name}-{label}.xml"
    # Each run compiles on a cold Inductor cache of its own: a cache the other run filled would
    # make either side's compiles cheap, and the ratio meaningless.
    cache = out / f"{suite.name}-{label}-inductor-cache"
    env = {**os.environ, **suite.env, "PYTHONDONTWRITEBYTECODE": "1", "TORCHINDUCTOR_CACHE_DIR": str(cache)}
    env.pop("PYTHONPATH", None)
    command = [
        str(python),
        "-m",
        "pytest",
        *suite.tests,
        *PYTEST_QUIET,
        f"--junitxml={junit}",
        *options,
    ]
    print("+", f"(cd {source} &&", " ".join(command), ")", flush=True)
    start = time.perf_counter()
    done = subprocess.run(command, cwd=source, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    (out / f"{suite.name}-{label}.log").write_text(done.stdout + done.stderr)
    if done.returncode not in (0, 1):
        raise SetupError(
            f"{suite.name} {label}: pytest exited {done.returncode} (usage error, collection error or "
            f"nothing collected); see {out / f'{suite.name}-{label}.log'}:\n{done.stdout[-2000:]}{done.stderr[-2000:]}"
        )
    return Outcome(seconds, done.returncode, junit_results(junit))


def run_with_plugin(
    python: Path, suite: Suite, source: Path, out: Path, label: str, options: list[str]
) -> Outcome:
    report = out / f"{suite.name}-{label}.json"
    repros = out / f"{suite.name}-{label}-repros"
    outcome = run_subset(
        python,
        suite,
        source,
        out,
        label,
        [
            "--compile-accuracy",
            f"--compile-accuracy-report={report}",
            f"--compile-accuracy-dir={repros}",
            *options,
        ],
    )
    outcome.report = json.loads(report.read_text()) if report.exists() else None
    return outcome


def graph_checks(report: dict | None) -> Counter[str]:
    """Statuses of the per-graph checks of plain ``torch.compile`` calls (and fixture checks)."""
    statuses: Counter[str] = Counter()
    for test in (report or {}).get("tests", []):
        for check in test.get("checks", []):
            statuses[check.get("status", "?")] += 1
    return statuses


def false_alarms(plain: Outcome, checked: Outcome) -> list[tuple[str, str]]:
    return [
        (test_id, checked.results[test_id][1])
        for test_id, (outcome, _) in sorted(plain.results.items())
        if outcome == "passed"
        and checked.results.get(test_id, ("missing", ""))[0] in ("failed", "error", "missing")
    ]


def outcome_cell(outcome: Outcome) -> str:
    counts = outcome.counts()
    return "/".join(str(counts[key]) for key in ("passed", "failed", "skipped")) + (
        f" (+{counts['error']} errors)" if counts["error"] else ""
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--cache",
        type=Path,
        default=Path(os.environ.get("REAL_SUITES_CACHE", "/tmp/pytest-torchcompile-real-suites")),
    )
    parser.add_argument(
        "--suites", default=",".join(SUITES), help=f"comma-separated, of {', '.join(SUITES)}"
    )
    parser.add_argument(
        "--workers", type=int, default=2, help="pytest-xdist workers of the parallel runs (0: none)"
    )
    args = parser.parse_args()
    unknown = [name for name in args.suites.split(",") if name not in SUITES]
    if unknown:
        parser.error(f"unknown suite(s) {', '.join(unknown)}; known: {', '.join(SUITES)}")
    suites = [SUITES[name] for name in args.suites.split(",")]
    out = args.cache / "runs" / time.strftime("%Y%m%dT%H%M%S")
    out.mkdir(parents=True)

    try:
        python = environment(args.cache, suites)
    except SetupError as error:
        print(f"\nSETUP FAILED: {error}", file=sys.stderr)
        return 2
    versions = subprocess.run(
        [str(python), "-c", "import torch; print(torch.__version__, torch.version.cuda or 'cpu')"],
        capture_output=True,
        text=True,
    ).stdout.split()
    commit = subprocess.run(
        ["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    )

    rows, alarms, failed_setup = [], [], []
    for suite in suites:
        source = args.cache / "src" / suite.sdist_dir
        try:
            runs = [
                (
                    run_subset(python, suite, source, out, "plain", []),
                    run_with_plugin(python, suite, source, out, "plugin", []),
                    "serial",
                )
            ]
            if args.workers:
                xdist = ["-n", str(args.workers)]
                runs.append(
                    (
                        run_subset(python, suite, source, out, f"plain-n{args.workers}", xdist),
                        run_with_plugin(
                            python, suite, source, out, f"plugin-n{args.workers}", xdist
                        ),
                        f"-n {args.workers}",
                    )
                )
        except SetupError as error:
            print(f"\n{suite.name}: {error}", file=sys.stderr)
            failed_setup.append(suite.name)
            continue
        for plain, checked, mode in runs:
            graphs = graph_checks(checked.report)
            found = false_alarms(plain, checked)
            alarms += [(suite.name, mode, test_id, reason) for test_id, reason in found]
            rows.append(
                (
                    suite.name,
                    suite.version,
                    mode,
                    str(len(plain.results)),
                    outcome_cell(plain),
                    outcome_cell(checked),
                    str(sum(graphs.values())),
                    " ".join(f"{k} {v}" for k, v in sorted(graphs.items())) or "-",
                    str(len(found)),
                    f"{plain.seconds:.1f}",
                    f"{checked.seconds:.1f}",
                    f"{checked.seconds / plain.seconds:.2f}x",
                )
            )

    print(
        f"\ntorch {versions[0] if versions else '?'} ({versions[1] if len(versions) > 1 else '?'}), "
        f"plugin {commit.stdout.strip() or '?'}, {os.cpu_count()} CPUs; logs, JUnit and JSON in {out}\n"
    )
    header = (
        "suite",
        "version",
        "run",
        "tests",
        "plain p/f/s",
        "checked p/f/s",
        "checks",
        "check statuses",
        "false alarms",
        "plain s",
        "checked s",
        "ratio",
    )
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for row in rows:
        print("| " + " | ".join(row) + " |")
    for name, mode, test_id, reason in alarms:
        print(
            f"FALSE ALARM ({name}, {mode}): {test_id} passes plainly, fails under --compile-accuracy: {reason}"
        )
    if failed_setup:
        print(f"SETUP FAILED: {', '.join(failed_setup)} (see above)", file=sys.stderr)
        return 2
    return 1 if alarms else 0


if __name__ == "__main__":
    sys.exit(main())
