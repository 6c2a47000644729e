"""The corpus of real Inductor bugs (``tests/realbugs``) end to end under ``--compile-accuracy``.

Each corpus module holds one bug from PyTorch's tracker as two user tests: one through the
``compile_accuracy`` fixture, one with a plain ``torch.compile`` call. Here each module runs in a
pytest subprocess with ``--compile-accuracy``; then each failing test's ``repro.py`` and
``minified.py`` run standalone. The goal for every bug: both tests fail, both files exit 1
(REPRODUCED). What falls short of that today is listed per module in ``SHORTFALLS`` with the
diagnosis, so that this test fails both when a new shortfall appears and when a listed one is
gone (then delete its line). Each module's row (caught by fixture / plain, exit codes, minified
ops and lines, stage, seconds) is printed in the markdown of ``docs/realbugs.md``.

Marked ``realbugs`` and run apart (``pytest -m realbugs``; CI runs it after the slow step): every
bug is compiled, judged, minified and rerun; the first twelve CPU bugs took about 21 minutes of wall
time on a 2-core machine. The CUDA bugs (modules marked ``cuda``) skip where no GPU is visible.
"""

from __future__ import annotations

import ast
import json
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import torch
from packaging.version import Version

pytest_plugins = ["pytester"]

CORPUS = Path(__file__).parents[1] / "realbugs"
MODULES = sorted(path.name for path in CORPUS.glob("test_pt*.py"))
PATHS = ("fixture", "plain")

# module -> shortfalls against the goal, as `shortfalls()` words them; docs/realbugs.md has the
# diagnosis of each.
SHORTFALLS: dict[str, list[str]] = {}


@dataclass(frozen=True)
class PathOutcome:
    """What one of a bug's two tests came to."""

    status: str
    repro_exit: int | None
    minified_exit: int | None
    ops_before: int | None
    ops_after: int | None
    minified_lines: int | None
    stop: str | None
    stage: str | None
    minify_seconds: float | None

    @property
    def caught(self) -> bool:
        return self.status.startswith("fail")


def unmet_need(module: Path) -> str | None:
    """Why this machine cannot show a corpus module's bug, or None: a ``cuda`` marker in its
    ``pytestmark`` without a GPU, or a ``NEEDS_CPU_CAPABILITY`` (torch's name of a vector ISA,
    as ``torch.backends.cpu.get_cpu_capability()`` gives it) this CPU lacks. Read from its source:
    importing a module may set torch's state as its bug needs."""
    values = {
        target.id: node.value
        for node in ast.parse(module.read_text()).body
        if isinstance(node, ast.Assign)
        for target in node.targets
        if isinstance(target, ast.Name)
    }
    if (
        "pytestmark" in values
        and "pytest.mark.cuda" in ast.unparse(values["pytestmark"])
        and not torch.cuda.is_available()
    ):
        return "a CUDA bug: needs a CUDA device"
    needed = (
        ast.literal_eval(values["NEEDS_CPU_CAPABILITY"])
        if "NEEDS_CPU_CAPABILITY" in values
        else None
    )
    found = torch.backends.cpu.get_cpu_capability()
    if needed is not None and found != needed:
        return f"its bug is in {needed} vector code; this CPU runs {found}"
    return None


def fixed_in(module: Path) -> str | None:
    """The first torch release found without the module's bug (its ``realbug`` marker's
    ``fixed_in``), read from its source; None where none is named."""
    for node in ast.walk(ast.parse(module.read_text())):
        if isinstance(node, ast.Call) and ast.unparse(node.func) == "pytest.mark.realbug":
            return next(
                (
                    ast.literal_eval(keyword.value)
                    for keyword in node.keywords
                    if keyword.arg == "fixed_in"
                ),
                None,
            )
    return None


def fixed_here(module: Path) -> bool:
    """Whether the installed torch is a release that has the module's bug fixed."""
    release = fixed_in(module)
    return release is not None and Version(Version(torch.__version__).base_version) >= Version(
        release
    )


def run_standalone(script: Path) -> int:
    """``python script`` from its own folder, as a user reruns it."""
    return subprocess.run(
        [sys.executable, script.name],
        cwd=script.parent,
        capture_output=True,
        text=True,
        timeout=600,
    ).returncode


def path_outcome(test: dict[str, Any] | None) -> PathOutcome:
    """``test``: the test's entry in the JSON report; None when it has none (it raised before
    any check was recorded)."""
    if test is None:
        return PathOutcome("not on record", *[None] * 8)
    failing = [check for check in test["checks"] if check["status"].startswith("fail")]
    check = failing[0] if failing else None
    repro = Path(check["repro_path"]) if check and check["repro_path"] else None
    minify = check["minify"] if check else None
    minified = Path(minify["path"]) if minify and minify["path"] else None
    return PathOutcome(
        status=test["status"],
        repro_exit=run_standalone(repro) if repro else None,
        minified_exit=run_standalone(minified) if minified else None,
        ops_before=minify["ops_before"] if minify else None,
        ops_after=minify["ops_after"] if minify and minified else None,
        minified_lines=len(minified.read_text().splitlines()) if minified else None,
        stop=minify["stop"] if minify else None,
        stage=minify["stage_summary"] if minify else None,
        minify_seconds=minify["seconds"] if minify else None,
    )


def shortfalls(outcomes: dict[str, PathOutcome]) -> list[str]:
    """Where the outcomes fall short of: caught, repro exits 1, minified exits 1."""
    found = []
    for name, outcome in outcomes.items():
        if not outcome.caught:
            found.append(f"{name}: not caught ({outcome.status})")
            continue
        if outcome.repro_exit != 1:
            found.append(f"{name}: repro.py exits {outcome.repro_exit}")
        if outcome.minified_exit is None:
            found.append(f"{name}: not minified ({outcome.stop})")
        elif outcome.minified_exit != 1:
            found.append(f"{name}: minified.py exits {outcome.minified_exit}")
    return found


def markdown_row(module: str, outcomes: dict[str, PathOutcome], seconds: float) -> str:
    issue = module.removeprefix("test_pt").split("_", 1)[0]

    def cell(value: object) -> str:
        return "-" if value is None else str(value)

    def minified(outcome: PathOutcome) -> str:
        if outcome.ops_after is None:
            return f"not minified ({outcome.stop})" if outcome.stop else "-"
        return f"{outcome.ops_before} -> {outcome.ops_after} ops, {outcome.minified_lines} lines"

    fixture, plain = outcomes["fixture"], outcomes["plain"]
    stages = {outcome.stage for outcome in outcomes.values() if outcome.stage}
    return " | ".join(
        [
            f"| #{issue}",
            "yes" if fixture.caught else f"no ({fixture.status})",
            "yes" if plain.caught else f"no ({plain.status})",
            f"{cell(fixture.repro_exit)} / {cell(plain.repro_exit)}",
            f"{cell(fixture.minified_exit)} / {cell(plain.minified_exit)}",
            f"{minified(fixture)} / {minified(plain)}",
            "; ".join(sorted(stages)) or "-",
            f"{seconds:.0f} |",
        ]
    )


@pytest.mark.realbugs
@pytest.mark.parametrize("module", MODULES, ids=[m.removesuffix(".py") for m in MODULES])
def test_real_bug_end_to_end(pytester: pytest.Pytester, module: str) -> None:
    reason = unmet_need(CORPUS / module)
    if reason is not None:
        pytest.skip(reason)
    shutil.copy(CORPUS / "conftest.py", pytester.path / "conftest.py")
    shutil.copy(CORPUS / module, pytester.path / module)
    start = time.monotonic()
    # A process of its own, as a user's run: each corpus module sets torch's state as its bug needs.
    result = pytester.runpytest_subprocess(
        "--compile-accuracy",
        "--compile-accuracy-report",
        "report.json",
        "--compile-accuracy-html",
        "report.html",
        "--compile-accuracy-minify-timeout",
        "120",
        "-p",
        "no:cacheprovider",
        "-W",
        "ignore::DeprecationWarning",
    )
    seconds = time.monotonic() - start
    assert "INTERNALERROR" not in result.stdout.str()
    report = json.loads((pytester.path / "report.json").read_text())
    tests = {test["nodeid"].rsplit("::test_", 1)[1]: test for test in report["tests"]}
    outcomes = {name: path_outcome(tests.get(name)) for name in PATHS}
    print(markdown_row(module, outcomes, seconds))
    if fixed_here(CORPUS / module):
        # Fixed in this torch: the user's tests pass, as they do without the plugin.
        assert {name: outcome.status for name, outcome in outcomes.items()} == dict.fromkeys(
            PATHS, "pass"
        )
        return
    assert shortfalls(outcomes) == SHORTFALLS.get(module, [])
    # The HTML page says, for each failing check, where in the graph its failure is.
    page = (pytester.path / "report.html").read_text()
    failing = sum(
        check["status"].startswith("fail") for test in report["tests"] for check in test["checks"]
    )
    assert page.count("<dt>where</dt>") == failing, module
    # A wrong result (not a crash) minified to a graph is placed where its deviation starts, or
    # inside the kernel that fuses the minimal graph's ops where returning them splits it.
    located = sum(
        bool(check.get("minify"))
        and check["minify"].get("failure_type") == "accuracy"
        and bool(check["minify"].get("path"))
        for test in report["tests"]
        for check in test["checks"]
    )
    placed = len(re.findall(r"<dt>where</dt><dd>(the deviation starts at|inside a kernel)", page))
    assert placed >= located, module
