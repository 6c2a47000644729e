"""Suites split over machines with pytest-split and pytest-shard: each shard's report says what it
selected, a shard gates only its own tests, and docs/ci.md's workflow, played here (its shard
and merge commands as written), judges the union as the unsharded run does."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

pytest_plugins = ["pytester"]

FAST = (
    "--no-compile-accuracy-minify",
    "-p",
    "no:cacheprovider",
    "-W",
    "ignore::DeprecationWarning",
)
WORKFLOW = Path(__file__).parents[2] / "docs" / "ci.md"

SUITE = """
import pytest
import torch

RELU_BUG = {"cpp.inject_relu_bug_TESTING_ONLY": "accuracy"}


@pytest.mark.parametrize("name", ["a", "b", "c"])
def test_model(compile_accuracy, name):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU())
    compile_accuracy(model, torch.randn(2, 4), inductor_config=RELU_BUG if name == "b" else {})


def test_plain_a():
    pass


def test_plain_b():
    pass
"""


def tid(name: str) -> str:
    return f"test_models.py::test_{name}"


def report_of(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text())


@pytest.mark.parametrize(
    "split",
    [
        ("pytest_split", "--splits", "2", "--group", "{k}", 1),
        ("pytest_shard", "--num-shards", "2", "--shard-id", "{k}", 0),
    ],
    ids=["pytest-split", "pytest-shard"],
)
def test_a_shard_gates_only_its_own_tests_and_reports_its_selection(
    pytester: pytest.Pytester,
    split: tuple[str, str, str, str, str, int],
) -> None:
    # Both splitters come with the dev extras; a machine without one skips its case.
    splitter_module, *options, first = split
    pytest.importorskip(splitter_module)
    pytester.makepyfile(
        test_models="""
        import torch

        def test_compiled(compile_accuracy):
            compile_accuracy(torch.nn.Linear(3, 3), torch.randn(2, 3))

        def test_one():
            pass

        def test_two():
            pass

        def test_three():
            pass
    """
    )
    # Every test has a row, so each shard's baseline holds rows of tests it does not select.
    pytester.path.joinpath("baseline.txt").write_text(
        "".join(f"{tid(name)}\tpass\n" for name in ("compiled", "one", "two", "three"))
    )
    selected, splitter = set(), "pytest-split" if first == 1 else "pytest-shard"
    for k in (first, first + 1):
        result = pytester.runpytest(
            "--compile-accuracy",
            *FAST,
            *(option.format(k=k) for option in options),
            "--compile-accuracy-baseline",
            "baseline.txt",
            "--compile-accuracy-strict",
            "--compile-accuracy-report",
            f"shard-{k}.json",
        )
        assert result.ret == pytest.ExitCode.OK, result.stdout.str()
        assert "unknown test id" not in result.stdout.str()
        run = report_of(pytester.path / f"shard-{k}.json")["run"]
        assert run["shard"] == {"splitter": splitter, "index": k, "count": 2}
        assert set(run["selected"]) | set(run["deselected"]) == {
            tid(name) for name in ("compiled", "one", "two", "three")
        }
        assert run["selected"] and not set(run["selected"]) & selected
        assert (run["failed"], run["exitstatus"]) == ([], 0)
        assert (
            run["baseline_sha256"]
            == hashlib.sha256((pytester.path / "baseline.txt").read_bytes()).hexdigest()
        )
        selected |= set(run["selected"])
    assert len(selected) == 4


def workflow_commands() -> tuple[str, str]:
    """The ``run: >-`` commands of the shard step and of the merge step of docs/ci.md's workflow."""
    text = WORKFLOW.read_text()
    commands = []
    lines = text.splitlines()
    for index, line in enumerate(lines):
        if line.strip() == "run: >-":
            indent = len(line) - len(line.lstrip())
            block = []
            for folded in lines[index + 1 :]:
                if len(folded) - len(folded.lstrip()) <= indent:
                    break
                block.append(folded.strip())
            commands.append(" ".join(block))
    (shard,) = [command for command in commands if "--splits 3 --group" in command]
    (merge,) = [command for command in commands if "pytest_torchcompile merge" in command]
    return shard, merge


def sh(command: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    command = re.sub(r"^python ", f"{shlex.quote(sys.executable)} ", command)
    return subprocess.run(
        ["bash", "-c", command], cwd=cwd, env=env, capture_output=True, text=True, timeout=600
    )


def verdicts(report: dict[str, Any]) -> dict[str, tuple[str, str]]:
    return {test["nodeid"]: (test["status"], test["baseline"]["kind"]) for test in report["tests"]}


@pytest.mark.slow
def test_the_ci_workflow_played_locally_agrees_with_the_unsharded_run(
    pytester: pytest.Pytester,
) -> None:
    # docs/ci.md's workflow shards with pytest-split (a dev extra): a machine without it skips.
    pytest.importorskip("pytest_split")
    pytester.makepyfile(test_models=SUITE)
    pytester.path.joinpath("compile-baseline.txt").write_text(
        f"{tid('model[a]')}\tpass\n{tid('model[b]')}\tpass\n{tid('model[gone]')}\tpass\n"
    )
    shard_command, merge_command = workflow_commands()
    # The shards' options of this test: minification is not what it is about.
    env = {
        **os.environ,
        "PYTEST_ADDOPTS": " ".join(FAST),
        "COLUMNS": "200",
        "GITHUB_STEP_SUMMARY": str(pytester.path / "step-summary.md"),
    }

    whole_command = re.sub(r" --splits 3 --group \$\{\{ matrix.group \}\}", "", shard_command)
    whole_command = whole_command.replace("shard/", "whole/")
    whole = sh(whole_command, pytester.path, {**env, "GITHUB_STEP_SUMMARY": ""})
    assert whole.returncode == 1, whole.stdout + whole.stderr

    for group in (1, 2, 3):
        shard = sh(shard_command.replace("${{ matrix.group }}", str(group)), pytester.path, env)
        assert shard.returncode in (0, 1), shard.stdout + shard.stderr
        # The upload and the download of the shard's artifact.
        shutil.move(
            pytester.path / "shard", pytester.path / "shards" / f"compile-accuracy-shard-{group}"
        )
    merged = sh(merge_command, pytester.path, env)

    said = merged.stdout
    assert merged.returncode == whole.returncode == 1, said + merged.stderr
    whole_report = report_of(pytester.path / "whole" / "report.json")
    merged_report = report_of(pytester.path / "compile-accuracy.json")
    assert (
        verdicts(merged_report)
        == verdicts(whole_report)
        == {
            tid("model[a]"): ("pass", "ok"),
            tid("model[b]"): ("fail_accuracy", "new_failure"),
            tid("model[c]"): ("pass", "missing"),
        }
    )
    assert merged_report["counts"] == whole_report["counts"]
    assert sorted(merged_report["run"]["selected"]) == sorted(whole_report["run"]["selected"])
    assert merged_report["run"]["failed"] == whole_report["run"]["failed"]
    shards = [
        report_of(path)["run"] for path in sorted((pytester.path / "shards").glob("*/report.json"))
    ]
    assert [run["shard"]["index"] for run in shards] == [1, 2, 3]
    assert sorted(test for run in shards for test in run["selected"]) == sorted(
        whole_report["run"]["selected"]
    )

    whole_lines = [
        line.replace(f"{pytester.path}{os.sep}", "")
        for line in whole.stdout.splitlines()
        if line.startswith(("baseline:", "  NEW FAILURE", "  missing", "WARNING"))
    ]
    assert len(whole_lines) == 5 and all(line in said.splitlines() for line in whole_lines), said
    (repro_dir,) = (pytester.path / "repros").iterdir()
    assert (repro_dir / "repro.py").is_file()
    (check,) = next(test for test in merged_report["tests"] if test["nodeid"] == tid("model[b]"))[
        "checks"
    ]
    assert check["repro_path"] == str(Path("repros") / repro_dir.name / "repro.py")
    # The merged page links the merged repro, relative to itself.
    page = (pytester.path / "compile-accuracy.html").read_text()
    assert f'href="repros/{repro_dir.name}/repro.py"' in page
    failures = [
        case.get("name")
        for case in ET.parse(pytester.path / "compile-accuracy.xml").iter("testcase")
        if case.find("failure") is not None
    ]
    assert failures == ["test_model[b]"]
    summary = (pytester.path / "step-summary.md").read_text()
    assert summary.count("### pytest-torchcompile") == 4  # three shards and the merge
    assert (
        summary.split("### pytest-torchcompile")[-1].count("NEW FAILURE") == 2
    )  # the count and b's row
