"""Plain torch.compile calls inside tests are checked graph by graph under --compile-accuracy."""

from __future__ import annotations

import json
import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest
from inline import runpytest

pytest_plugins = ["pytester"]

SUITE = """
import pytest, torch

RELU_BUG = {"cpp.inject_relu_bug_TESTING_ONLY": "accuracy"}


@pytest.mark.inductor_repro(inductor_config=RELU_BUG)
def test_plain_compile():
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
    assert torch.compile(model)(torch.randn(4, 8)).shape == (4, 2)


class ReluInBackward(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, grad):
        return grad.relu() * 2


@pytest.mark.inductor_repro(inductor_config=RELU_BUG)
def test_backward_only_bug():
    def f(x):
        return ReluInBackward.apply(x).sin()

    x = torch.randn(16, 8, requires_grad=True)
    torch.compile(f)(x).sum().backward()


def test_graph_break_and_other_backend():
    def f(x):
        y = x.cos()
        print("graph break")
        return y.relu()

    torch.compile(f)(torch.randn(8))
    torch.compile(f, backend="aot_eager")(torch.randn(8))
"""


def test_plain_compile_calls_are_checked_per_graph(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "200")  # each failure's message on one line
    pytester.makepyfile(test_models=SUITE)
    result = pytester.runpytest("--compile-accuracy", "--no-compile-minify")
    result.assert_outcomes(passed=1, failed=2)
    result.stdout.fnmatch_lines(
        [
            "*test_plain_compile*",
            "*fail_accuracy: * of graph 0 (forward) from *test_models.py:*(test_plain_compile)*",
        ]
    )
    result.stdout.fnmatch_lines(["*fail_accuracy: * of graph * (backward) from *"])
    repros = sorted((pytester.path / ".compile-accuracy").glob("*backward_only_bug*/repro.py"))
    assert len(repros) == 1
    assert "(backward)" in repros[0].read_text().splitlines()[1]
    run = subprocess.run(
        [sys.executable, str(repros[0])], capture_output=True, text=True, timeout=300
    )
    assert run.returncode == 1, run.stdout + run.stderr


def test_flag_off_and_marked_scope(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_models=SUITE)
    pytester.runpytest().assert_outcomes(passed=3)
    pytester.makepyfile(
        test_unmarked="""
        import torch, torch._inductor.config as config

        def test_unmarked():
            with config.patch({"cpp.inject_relu_bug_TESTING_ONLY": "accuracy"}):
                torch.compile(torch.nn.ReLU())(torch.randn(8))
    """
    )
    scoped = pytester.runpytest(
        "test_unmarked.py", "--compile-accuracy", "--compile-accuracy-scope=marked"
    )
    scoped.assert_outcomes(passed=1)
    everything = pytester.runpytest("test_unmarked.py", "--compile-accuracy", "--no-compile-minify")
    everything.assert_outcomes(failed=1)


# --- every test whose plain graphs were judged is on record ---------------------------------------

RECORDED_SUITE = """
import pytest, torch

RELU_BUG = {"cpp.inject_relu_bug_TESTING_ONLY": "accuracy"}


def cos_then_relu(x):
    y = x.cos()
    print("graph break")
    return y.relu()


def test_two_graphs():
    torch.compile(cos_then_relu)(torch.randn(8))


@pytest.mark.inductor_repro(inductor_config=RELU_BUG)
def test_one_of_two_fails():
    torch.compile(cos_then_relu)(torch.randn(8))


def test_compiles_nothing():
    assert torch.ones(2).sum() == 2
"""


@pytest.mark.parametrize(
    "plugins",
    [["-p", "no:xdist"], pytest.param(["-n", "2"], marks=pytest.mark.slow)],
    ids=["no-xdist", "xdist"],
)
def test_plain_compile_checks_reach_every_report_and_the_baseline(
    pytester: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
    plugins: list[str],
) -> None:
    pytester.makepyfile(test_models=RECORDED_SUITE)
    monkeypatch.setenv("COLUMNS", "120")  # each row of the summary on one line
    github = pytester.path / "summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(github))
    result = runpytest(
        pytester,
        *plugins,
        "--compile-accuracy",
        "--no-compile-minify",
        "-p",
        "no:cacheprovider",
        "--compile-accuracy-report",
        "report.json",
        "--junitxml",
        "junit.xml",
        "--compile-accuracy-baseline",
        "baseline.txt",
        "--compile-accuracy-update-baseline",
    )
    result.assert_outcomes(passed=2, failed=1)
    assert result.ret == 0, "a recording run's compile-accuracy failures do not fail it"
    result.stdout.fnmatch_lines(
        [
            "fail_accuracy  * 2 judged  NEW FAILURE  test_models.py::test_one_of_two_fails",
            "pass  * 2 judged  missing      test_models.py::test_two_graphs",
            "compile accuracy: 3 checks in 2 tests: 2 pass, 1 fail_accuracy",
            "plain torch.compile graphs: 4 judged",
        ]
    )
    assert (pytester.path / "baseline.txt").read_text().splitlines()[1:] == [
        "test_models.py::test_one_of_two_fails\tfail_accuracy",
        "test_models.py::test_two_graphs\tpass",
    ]

    report = json.loads((pytester.path / "report.json").read_text())
    assert report["counts"]["graphs"] == {"judged": 4, "unchecked": 0}
    tests = {test["nodeid"]: test for test in report["tests"]}
    assert list(tests) == [
        "test_models.py::test_one_of_two_fails",
        "test_models.py::test_two_graphs",
    ]
    (passing,) = tests["test_models.py::test_two_graphs"]["checks"]
    assert (
        passing["status"],
        passing["graphs_judged"],
        passing["unchecked"],
        passing["message"],
    ) == ("pass", 2, [], "2 graph(s) pass")
    failing, rest = tests["test_models.py::test_one_of_two_fails"]["checks"]
    assert (failing["status"], failing["graphs_judged"], failing["graph"].split(" from ")[0]) == (
        "fail_accuracy",
        1,
        "graph 1 (inference)",
    )
    assert (rest["status"], rest["graphs_judged"]) == ("pass", 1)
    assert tests["test_models.py::test_one_of_two_fails"]["graphs"] == {"judged": 2, "unchecked": 0}

    properties = {
        case.get("name"): [(p.get("name"), p.get("value")) for p in case.iter("property")]
        for case in ET.parse(pytester.path / "junit.xml").getroot().iter("testcase")
    }
    assert properties["test_two_graphs"] == [
        ("torchcompile_status", "pass"),
        ("torchcompile_reference", "fp64"),
        ("torchcompile_graphs_judged", "2"),
    ]
    assert ("torchcompile_status", "fail_accuracy") in properties["test_one_of_two_fails"]
    assert properties["test_compiles_nothing"] == []

    markdown = github.read_text()
    assert (
        "**Compile accuracy:** 3 checks in 2 tests: 2 pass, 1 fail_accuracy; plain torch.compile graphs: "
        "4 judged\n"
    ) in markdown
    assert (
        "| `test_models.py::test_two_graphs` | - | pass | - | 2 judged | missing | - | - | - |"
        in markdown
    )
    assert "test_compiles_nothing" not in markdown


UNCHECKED_SUITE = """
import torch


def test_dropout_in_train_mode():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Dropout(0.5)).train()
    torch.compile(model)(torch.randn(4, 8))
"""


@pytest.mark.parametrize(
    "plugins",
    [["-p", "no:xdist"], pytest.param(["-n", "2"], marks=pytest.mark.slow)],
    ids=["no-xdist", "xdist"],
)
def test_graphs_that_cannot_be_judged_are_said_per_test(
    pytester: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
    plugins: list[str],
) -> None:
    pytester.makepyfile(test_models=UNCHECKED_SUITE)
    monkeypatch.setenv("COLUMNS", "120")
    result = runpytest(
        pytester,
        *plugins,
        "--compile-accuracy",
        "-p",
        "no:cacheprovider",
        "--compile-accuracy-report",
        "report.json",
    )
    result.assert_outcomes(passed=1)
    reason = "intermediates not judged (the graph draws random numbers, which a recompiled cut would draw anew)"
    result.stdout.fnmatch_lines(
        [
            "status  ratio  graphs                 test",
            "pass    *      1 judged, 1 unchecked  test_models.py::test_dropout_in_train_mode",
            "    unchecked graph 0 (forward) from test_models.py:7 (test_dropout_in_train_mode): intermediates not judged*",
            "compile accuracy: 1 check in 1 test: 1 pass",
            "plain torch.compile graphs: 1 judged, 1 unchecked",
        ]
    )
    (test,) = json.loads((pytester.path / "report.json").read_text())["tests"]
    (check,) = test["checks"]
    assert check["unchecked"] == [
        f"graph 0 (forward) from test_models.py:7 (test_dropout_in_train_mode): {reason}"
    ]
    assert (check["graphs_judged"], check["message"]) == (1, "1 graph(s) pass, 1 unchecked")
