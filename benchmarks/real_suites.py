"""Run third-party test suites as they are, plainly and under ``--compile-accuracy``.

Installs each suite's released package from PyPI with its dependencies, the plugin (editable, from
this checkout) and the CPU torch pin of ``constraints.txt`` into a virtual environment (one shared
by the suites, but for a suite whose dependencies pin another's otherwise: ``Suite.environment``),
runs a subset of the suite's own tests that
exercises ``torch.compile`` plainly and with the plugin (serially, then under ``-n N``), and prints
per suite: tests, outcomes both ways, checks judged, outcome differences, plugin crashes and wall
time both ways.

Tests come from the suite's PyPI sdist where it ships them. Where it does not, they come from a
copy of the project's repository at the release tag, named with ``--source NAME=DIR`` (the help
lists which suites need one, and which repository and tag).

The differential view: per test, its outcome plainly against its outcome under
``--compile-accuracy``. A checked run must decide every test as the plain one does; the one
difference allowed is a test failed by a compiler failure the plugin confirmed (a check of the
test in the JSON report is ``fail_accuracy``, ``fail_compile`` or ``fail_runtime``). Any other
(a plain failure that passes checked, a skip that runs, a pass that fails for another reason) is
an outcome difference, printed with both outcomes. A plugin crash is a test of the checked run
that fails through pytest-torchcompile's own code (its traceback runs through the plugin, or it
names a defect of the plugin), or an INTERNALERROR. The exit status is 1 when either appears, 2
when a suite cannot be downloaded, installed or collected, else 0.

    python benchmarks/real_suites.py [--cache DIR] [--suites e3nn,einops,roma] [--workers 2]
        [--source kornia=DIR ...]

Downloads and the environments are cached under ``--cache`` (default ``$REAL_SUITES_CACHE`` or
``/tmp/pytest-torchcompile-real-suites``), so reruns start in seconds. Only the standard library is
needed to start it.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import re
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
    """A PyPI project, where its tests come from, and the subset of them that compiles."""

    name: str
    version: str
    tests: tuple[str, ...]
    """Test paths (relative to the sources' root) and pytest options that pick the subset."""
    extra_requirements: tuple[str, ...] = ()
    """Packages the tests import beyond the project's own dependencies."""
    env: dict[str, str] = field(default_factory=dict)
    """Variables the suite's tests need."""
    drop: tuple[str, ...] = ()
    """Files of the unpacked sdist removed before its tests run."""
    repository: str = ""
    """``owner/name`` of the project's repository when its sdist ships no tests: the tests then
    come from a copy at ``tag`` named with ``--source``, and the package from PyPI."""
    tag: str = ""
    distribution: str = ""
    """The PyPI name, where it differs from ``name``."""
    options: tuple[str, ...] = ()
    """pytest options given after the script's own (``PYTEST_QUIET``), so that they win where both
    set the same thing: a ``-W`` filter given later takes precedence."""
    environment: str = "venv"
    """The virtual environment (a folder of the cache) the suite is installed in; a suite whose
    dependencies pin another's to another version gets one of its own."""

    @property
    def sdist_dir(self) -> str:
        return f"{self.name}-{self.version}"

    @property
    def requirement(self) -> str:
        return f"{self.distribution or self.name}=={self.version}"


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
        Suite(
            "kornia",
            "0.8.3",
            # The dynamo tests of four filter modules: each compiles a filter with the backend
            # that KORNIA_TEST_OPTIMIZER names (Inductor here) and compares it with eager. Sobel
            # fills 3-D gradients into an empty buffer slice by slice; Canny thresholds and
            # median sorts (ops that can mask a deviation). All 94 filter dynamo tests take
            # several minutes a run here.
            (
                "tests/filters/test_sobel.py",
                "tests/filters/test_filters.py",
                "tests/filters/test_canny.py",
                "tests/filters/test_median.py",
                "-k",
                "dynamo",
            ),
            # Its conftest's report header imports onnx.
            extra_requirements=("onnx",),
            env={"KORNIA_TEST_OPTIMIZER": "inductor"},
            repository="kornia/kornia",
            tag="v0.8.3",
        ),
        Suite(
            "torch_geometric",
            "2.8.0.post1",
            # Its torch.compile tests (Inductor): message passing, convolutions, GNN models,
            # EdgeIndex; FULL_TEST=1 lets the ones marked onlyFullTest run.
            (
                "test/nn/test_compile_basic.py",
                "test/nn/test_compile_conv.py",
                "test/nn/test_compile_dynamic.py",
                "test/nn/models/test_basic_gnn.py",
                "test/nn/conv/test_sage_conv.py",
                "test/nn/conv/test_hetero_conv.py",
                "test/test_edge_index.py",
                "test/utils/test_softmax.py",
                "-k",
                "compile",
            ),
            env={"FULL_TEST": "1"},
            repository="pyg-team/pytorch_geometric",
            tag="2.8.0.post1",
            distribution="torch-geometric",
        ),
        Suite(
            "tensordict",
            "0.14.0",
            # Its torch.compile tests (Inductor, fullgraph): TensorDict, tensorclass, nn modules,
            # functional calls, guards, export, compiled optimizer steps; the reduce-overhead
            # half asks for CUDA graphs.
            ("test/compile/test_compile.py", "-k", "not reduce"),
            repository="pytorch/tensordict",
            tag="v0.14.0",
        ),
        Suite(
            "heavyball",
            "3.2.0",
            # heavyball compiles its optimizers' update functions with Inductor itself; these
            # tests step optimizers and compare with reference updates.
            (
                "test/test_compile_step.py::test_compile_step_matches_eager[AdamW]",
                "test/test_compile_step.py::test_compile_step_matches_eager[LaProp]",
            ),
            repository="HomebrewML/HeavyBall",
            tag="v3.2.0",
        ),
        Suite(
            "einx",
            "0.4.3",
            # Its value tests on the torch backend: each einx call plain, and wrapped in
            # torch.compile with dynamic and with static shapes (its conftest's three setups).
            ("test/test_values.py", "--backend", "torch"),
            extra_requirements=("numpy",),
        ),
        Suite(
            "lightning",
            "2.6.5",
            # Its tests of compiled LightningModules: Trainer.fit/test of a torch.compile'd model.
            ("tests/tests_pytorch/utilities/test_compile.py",),
            extra_requirements=("cloudpickle", "psutil"),
            repository="Lightning-AI/pytorch-lightning",
            tag="2.6.5",
        ),
        Suite(
            "torchrl",
            "0.14.1",
            # Its torch.compile tests (Inductor) of value estimators (TD(lambda), GAE), recurrent
            # modules (scan, padded sequences with resets; the Triton ones skip on CPU) and
            # DreamerV3 (two-hot decoding, a block-GRU prior). test_block_gru_torch_compile fails
            # plainly: it seeds eager and compiled alike and compares their samples, which
            # Inductor's CPU random numbers do not reproduce; it must fail checked too.
            (
                "test/compile/test_compile_value.py",
                "test/modules/test_rnn.py",
                "test/objectives/test_dreamer_v3.py",
                "test/modules/test_dreamer_components.py",
                "-k",
                "compile",
            ),
            repository="pytorch/rl",
            tag="v0.14.1",
            # torchrl 0.14.1 needs tensordict 0.14.3 or later; the tensordict suite pins 0.14.0.
            environment="venv-torchrl",
        ),
        Suite(
            "torchao",
            "0.18.0",
            # Its x86 Inductor pattern-matcher tests of PT2E-quantized models: each compiles a
            # quantized conv+relu, linear (int8, fp8, dynamic, dequant promotion), cat or maxpool
            # model with Inductor, checks that the fused patterns matched and compares with
            # eager. The whole file takes far too long here; "qadd" matches none at this tag.
            (
                "test/quantization/pt2e/test_x86inductor_fusion.py",
                "-k",
                "TestPatternMatcher and (qcat or qconv2d_relu or qlinear_cpu or qmaxpool or qadd "
                "or dequant)",
            ),
            # torch.testing._internal.common_utils imports expecttest.
            extra_requirements=("expecttest",),
            repository="pytorch/ao",
            tag="v0.18.0",
        ),
        Suite(
            "peft",
            "0.21.2",
            # Its LoRA hotswapping tests: adapters swapped into a torch.compile'd model (Inductor)
            # without recompiling. Run as in the report that found it, with torch's deprecation
            # warnings as errors: three tests fail plainly so, and must fail alike checked.
            ("tests/test_initialization.py", "-k", "TestHotSwapping"),
            # tests/testing_utils.py imports datasets; peft.tuners.lora.corda imports attr
            # (attrs), which peft does not declare; test_initialization imports scipy.
            extra_requirements=("attrs", "datasets", "scipy"),
            # Its pyproject's addopts asks for pytest-cov. The sdist ships tests/ without its
            # __init__.py, and test_initialization imports .testing_utils: importlib mode makes
            # that relative import work. -W comes after PYTEST_QUIET's ignore, and so wins.
            options=(
                "-o",
                "addopts=",
                "--import-mode=importlib",
                "-W",
                "error::DeprecationWarning",
            ),
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


def unpacked_sdist(python: Path, cache: Path, suite: Suite) -> Path:
    """The suite's sdist, downloaded and unpacked under the cache."""
    sdists = cache / "sdists"
    sources = cache / "src"
    sources.mkdir(parents=True, exist_ok=True)
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
                suite.requirement,
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
    return sources / suite.sdist_dir


def repository_checkout(suite: Suite, given: dict[str, Path]) -> Path:
    """The copy of the suite's repository at its release tag that ``--source`` names."""
    directory = given.get(suite.name)
    if directory is None:
        raise SetupError(
            f"{suite.name}'s sdist ships no tests: pass --source {suite.name}=DIR, DIR a copy of "
            f"the {suite.repository} repository at tag {suite.tag}"
        )
    paths = itertools.takewhile(lambda argument: not argument.startswith("-"), suite.tests)
    missing = [path for path in paths if not (directory / path.split("::")[0]).exists()]
    if missing:
        raise SetupError(
            f"--source {suite.name}={directory} lacks {', '.join(missing)}: "
            f"is it {suite.repository} at tag {suite.tag}?"
        )
    return directory


def environment(
    cache: Path, suites: list[Suite], given: dict[str, Path], name: str = "venv"
) -> tuple[Path, dict[str, Path]]:
    """The python of the virtual environment ``name`` under the cache, with the plugin, the suites
    and their dependencies, and each suite's test sources."""
    # A missing checkout is told before anything is downloaded.
    sources = {
        suite.name: repository_checkout(suite, given) for suite in suites if suite.repository
    }
    env_dir = cache / name
    python = env_dir / "bin" / "python"
    if not python.exists():
        venv.create(env_dir, with_pip=True)
    # One pip call, so that the CPU torch pin holds for every dependency at once.
    requirements = ["-e", str(REPO)]
    for suite in suites:
        if suite.repository:
            requirements.append(suite.requirement)
        else:
            sources[suite.name] = unpacked_sdist(python, cache, suite)
            requirements.append(str(sources[suite.name]))
        requirements += suite.extra_requirements
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
    return python, sources


@dataclass
class Outcome:
    """One pytest run of a suite's subset."""

    seconds: float
    load: float
    """The 1-minute load average when the run started."""
    exit_code: int
    results: dict[str, tuple[str, str]]
    """Test id -> (outcome, first line of the failure message)."""
    crashes: dict[str, str]
    """Test id -> what pytest-torchcompile's own code raised in it ("INTERNALERROR" for the run)."""
    report: dict | None = None

    def counts(self) -> Counter[str]:
        return Counter(outcome for outcome, _ in self.results.values())


# The last line of pytest's long representation: "path:line: ExceptionType".
RAISED_AT = re.compile(r"^(?P<path>\S+\.py):\d+: (?P<type>[\w.]+)$")


def plugin_crash(text: str) -> str:
    """What the plugin's own code raised, from a failure's text; empty when it raised nothing.

    A test the plugin fails on purpose ends in pytest's ``Failed``; anything else raised in the
    plugin's files, or a repro the plugin calls its own defect, is a crash."""
    if "defect of pytest-torchcompile" in text:
        return next(
            line for line in text.splitlines() if "defect of pytest-torchcompile" in line
        ).strip()
    last = next((line for line in reversed(text.strip().splitlines()) if RAISED_AT.match(line)), "")
    raised = RAISED_AT.match(last)
    if raised and "pytest_torchcompile" in raised["path"] and not raised["type"].endswith("Failed"):
        return last
    return ""


def junit_results(path: Path) -> tuple[dict[str, tuple[str, str]], dict[str, str]]:
    results: dict[str, tuple[str, str]] = {}
    crashes: dict[str, str] = {}
    if not path.exists():
        return results, crashes
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
                if outcome in ("failed", "error") and (crash := plugin_crash(child.text or "")):
                    crashes[test_id] = crash
                break
        # A test failing in teardown has two entries; the worst one counts.
        if test_id not in results or outcome in ("failed", "error"):
            results[test_id] = (outcome, message)
    return results, crashes


def run_subset(
    python: Path, suite: Suite, source: Path, out: Path, label: str, options: list[str]
) -> Outcome:
    junit = out / f"{suite.name}-{label}.xml"
    # Each run compiles on a cold Inductor cache of its own: a cache the other run filled would
    # make either side's compiles cheap, and the ratio meaningless.
    cache = out / f"{suite.name}-{label}-inductor-cache"
    env = {
        **os.environ,
        **suite.env,
        "PYTHONDONTWRITEBYTECODE": "1",
        "TORCHINDUCTOR_CACHE_DIR": str(cache),
    }
    env.pop("PYTHONPATH", None)
    # -P: the sources' root is not put on sys.path, so that a repository's checkout does not
    # shadow the released package installed from PyPI (whose compiled parts it lacks).
    command = [
        str(python),
        "-P",
        "-m",
        "pytest",
        *suite.tests,
        *PYTEST_QUIET,
        *suite.options,
        f"--junitxml={junit}",
        *options,
    ]
    print("+", f"(cd {source} &&", " ".join(command), ")", flush=True)
    # The machine may be shared: the load when the run starts goes with its wall time.
    load = os.getloadavg()[0]
    start = time.perf_counter()
    done = subprocess.run(command, cwd=source, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    log = done.stdout + done.stderr
    (out / f"{suite.name}-{label}.log").write_text(log)
    if done.returncode not in (0, 1):
        raise SetupError(
            f"{suite.name} {label}: pytest exited {done.returncode} (usage error, collection error or "
            f"nothing collected); see {out / f'{suite.name}-{label}.log'}:\n{done.stdout[-2000:]}{done.stderr[-2000:]}"
        )
    results, crashes = junit_results(junit)
    if "INTERNALERROR" in log:
        crashes["(run)"] = "INTERNALERROR"
    return Outcome(seconds, load, done.returncode, results, crashes)


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


def graphs_judged(report: dict | None) -> str:
    """The graphs of plain ``torch.compile`` calls that the run judged, from the report's counts."""
    judged = (report or {}).get("counts", {}).get("graphs", {}).get("judged")
    return "?" if judged is None else str(judged)


COMPILER_FAILURES = frozenset({"fail_accuracy", "fail_compile", "fail_runtime"})


def junit_id(nodeid: str) -> str:
    """A pytest node id as :func:`junit_results` names the test (JUnit's classname and name)."""
    path, *classes, name = nodeid.split("::")
    return "::".join((".".join([path.removesuffix(".py").replace("/", "."), *classes]), name))


def compiler_failures(report: dict | None) -> set[str]:
    """The tests (by JUnit id) with a check that found a compiler failure, from the JSON report."""
    return {
        junit_id(test["nodeid"])
        for test in (report or {}).get("tests", [])
        if any(check.get("status") in COMPILER_FAILURES for check in test.get("checks", []))
    }


def outcome_differences(plain: Outcome, checked: Outcome) -> list[tuple[str, str, str, str]]:
    """(test id, plain outcome, checked outcome, the checked failure's first line) of every test
    the two runs decide differently, but for one failed by a confirmed compiler failure."""
    confirmed = compiler_failures(checked.report)
    differences = []
    for test_id in sorted(plain.results.keys() | checked.results.keys()):
        before = plain.results.get(test_id, ("missing", ""))[0]
        after, message = checked.results.get(test_id, ("missing", ""))
        if before != after and not (after == "failed" and test_id in confirmed):
            differences.append((test_id, before, after, message))
    return differences


def outcome_cell(outcome: Outcome) -> str:
    counts = outcome.counts()
    return "/".join(str(counts[key]) for key in ("passed", "failed", "skipped")) + (
        f" (+{counts['error']} errors)" if counts["error"] else ""
    )


def source_option(value: str) -> tuple[str, Path]:
    name, separator, directory = value.partition("=")
    if not separator or not name or not directory:
        raise argparse.ArgumentTypeError(f"expected NAME=DIR, got {value!r}")
    return name, Path(directory).resolve()


def needing_sources() -> str:
    return "; ".join(
        f"{suite.name}: {suite.repository} at tag {suite.tag}"
        for suite in SUITES.values()
        if suite.repository
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--cache",
        type=Path,
        default=Path(os.environ.get("REAL_SUITES_CACHE", "/tmp/pytest-torchcompile-real-suites")),
    )
    parser.add_argument(
        "--suites",
        help=f"comma-separated, of {', '.join(SUITES)} (default: those whose sdist ships their "
        "tests, and those --source names)",
    )
    parser.add_argument(
        "--workers", type=int, default=2, help="pytest-xdist workers of the parallel runs (0: none)"
    )
    parser.add_argument(
        "--source",
        type=source_option,
        action="append",
        default=[],
        metavar="NAME=DIR",
        help="a copy of a suite's repository at its release tag, for the suites whose sdist "
        f"ships no tests ({needing_sources()}); repeat for each",
    )
    args = parser.parse_args()
    given = dict(args.source)
    names = (
        args.suites.split(",")
        if args.suites
        else [name for name, suite in SUITES.items() if not suite.repository or name in given]
    )
    unknown = [name for name in [*names, *given] if name not in SUITES]
    if unknown:
        parser.error(f"unknown suite(s) {', '.join(unknown)}; known: {', '.join(SUITES)}")
    suites = [SUITES[name] for name in names]
    out = args.cache / "runs" / time.strftime("%Y%m%dT%H%M%S")
    out.mkdir(parents=True)

    pythons: dict[str, Path] = {}
    sources: dict[str, Path] = {}
    try:
        for name in dict.fromkeys(suite.environment for suite in suites):
            members = [suite for suite in suites if suite.environment == name]
            pythons[name], found = environment(args.cache, members, given, name)
            sources.update(found)
    except SetupError as error:
        print(f"\nSETUP FAILED: {error}", file=sys.stderr)
        return 2
    python = next(iter(pythons.values()))
    commit = subprocess.run(
        ["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    )

    versions = subprocess.run(
        [str(python), "-c", "import torch; print(torch.__version__, torch.version.cuda or 'cpu')"],
        capture_output=True,
        text=True,
    ).stdout.split()

    rows, differences, crashes, failed_setup = [], [], [], []
    for suite in suites:
        source, python = sources[suite.name], pythons[suite.environment]
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
            found = outcome_differences(plain, checked)
            differences += [(suite.name, mode, *difference) for difference in found]
            crashes += [
                (suite.name, mode, test_id, what)
                for test_id, what in sorted(checked.crashes.items())
            ]
            rows.append(
                (
                    suite.name,
                    suite.version,
                    mode,
                    str(len(plain.results)),
                    outcome_cell(plain),
                    outcome_cell(checked),
                    str(sum(graphs.values())),
                    graphs_judged(checked.report),
                    " ".join(f"{k} {v}" for k, v in sorted(graphs.items())) or "-",
                    str(len(found)),
                    str(len(checked.crashes)),
                    f"{plain.seconds:.1f}",
                    f"{checked.seconds:.1f}",
                    f"{checked.seconds / plain.seconds:.2f}x",
                    f"{plain.load:.1f} / {checked.load:.1f}",
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
        "graphs judged",
        "check statuses",
        "outcome differences",
        "plugin crashes",
        "plain s",
        "checked s",
        "ratio",
        "load plain / checked",
    )
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for row in rows:
        print("| " + " | ".join(row) + " |")
    for name, mode, test_id, before, after, reason in differences:
        print(
            f"OUTCOME DIFFERENCE ({name}, {mode}): {test_id}: {before} plainly, {after} under "
            f"--compile-accuracy{f': {reason}' if reason else ''}"
        )
    for name, mode, test_id, what in crashes:
        print(f"PLUGIN CRASH ({name}, {mode}): {test_id}: {what}")
    if failed_setup:
        print(f"SETUP FAILED: {', '.join(failed_setup)} (see above)", file=sys.stderr)
        return 2
    return 1 if differences or crashes else 0


if __name__ == "__main__":
    sys.exit(main())
