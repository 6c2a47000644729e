"""Failing tests whose minimal graphs share a signature are one root cause: listed once under the
summary (wrapped to the terminal), in the JSON report, and each failure names its minified repro and
stage; without xdist and under it."""

from __future__ import annotations

import json

import pytest
from inline import runpytest

SUITE = """
import pytest, torch


def mlp(seed):
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))


@pytest.mark.inductor_repro(inductor_config={"cpp.inject_relu_bug_TESTING_ONLY": "accuracy"})
def test_first(compile_accuracy):
    compile_accuracy(mlp(0), torch.randn(4, 8))


@pytest.mark.inductor_repro(inductor_config={"cpp.inject_relu_bug_TESTING_ONLY": "accuracy"})
def test_second(compile_accuracy):
    compile_accuracy(mlp(1), torch.randn(2, 8))
"""


@pytest.mark.slow
@pytest.mark.parametrize("workers", [["-p", "no:xdist"], ["-n", "2"]], ids=["serial", "xdist"])
def test_two_tests_with_one_bug_are_one_root_cause(
    pytester: pytest.Pytester, workers: list[str]
) -> None:
    pytester.makepyfile(test_suite=SUITE)

    result = runpytest(
        pytester, *workers, "--compile-accuracy", "--compile-accuracy-report", "report.json"
    )

    result.assert_outcomes(failed=2)
    summary = (
        "[2 tests] deviation appears in Inductor's C++ codegen of aten.relu "
        "(cpp.inject_relu_bug_TESTING_ONLY='accuracy') | ops: aten.relu | accuracy"
    )
    result.stdout.fnmatch_lines(
        [
            "compile accuracy root causes: 1",
            "  [[]2 tests] deviation appears in *",
            "      test_suite.py::test_first",
            "      test_suite.py::test_second",
        ]
    )
    section = result.stdout.lines[result.stdout.lines.index("compile accuracy root causes: 1") :]
    section = section[: section.index("      test_suite.py::test_first")]
    assert " ".join(" ".join(section).split()) == f"compile accuracy root causes: 1 {summary}"
    assert max(map(len, section)) <= 80, "wrapped to pytester's 80-column terminal"
    # Each failure, printed after the minify phase, names its minified repro and stage.
    for name in ("test_first", "test_second"):
        result.stdout.fnmatch_lines(
            [
                f"_*_ {name} _*_",
                "*- compile accuracy: minified -*",
                f"minified: .compile-accuracy/test_suite.py__{name}/minified.py",
                "minify: 5 -> 1 ops, *",
                "stage: deviation appears in Inductor's C++ codegen of*",
            ]
        )
    groups = json.loads((pytester.path / "report.json").read_text())["root_causes"]
    assert [(group["stage"], group["ops"], group["tests"]) for group in groups] == [
        (
            "inductor.codegen.cpp",
            ["aten.relu"],
            ["test_suite.py::test_first", "test_suite.py::test_second"],
        )
    ]
