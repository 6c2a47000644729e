"""A check stopped from outside the model, as pytest-timeout's signal method stops a test (it
calls ``pytest.fail`` from wherever the test is): the test fails as told, and the compile accuracy
section keeps a row for it saying that its check was stopped, rather than a bare header."""

from __future__ import annotations

import json

import pytest

pytest_plugins = ["pytester"]


@pytest.fixture(autouse=True)
def wide_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    """These tests read whole lines: a run's output wraps them at the terminal's width."""
    monkeypatch.setenv("COLUMNS", "400")


SUITE = """
import pytest
import torch


def times_out(x):
    pytest.fail("Timeout (>1.0s) from pytest-timeout.")


def test_slow(compile_accuracy):
    compile_accuracy(times_out, torch.ones(3))
"""


def test_a_check_stopped_by_a_timeout_keeps_its_row(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_model=SUITE)
    result = pytester.runpytest("--compile-accuracy", "--no-compile-accuracy-minify")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*= compile accuracy =*",
            "status      ratio  test",
            "not_judged  -      test_model.py::test_slow",
            "    not_judged: the check was stopped before its verdict: Failed: Timeout (>1.0s) from pytest-timeout.",
        ]
    )


STOPPING_CONFTEST = """
import pytest
from pytest_torchcompile.checking import graph_calls


def stopped(*args, **kwargs):
    {stop}


@pytest.fixture(autouse=True)
def stop_while_judging(monkeypatch):
    # The stop comes while the plugin judges a graph of the test's own compile.
    monkeypatch.setattr(graph_calls, "mutated_inputs", stopped)
"""

PLAIN_SUITE = """
import pytest
import torch


@pytest.mark.inductor_repro
def test_plain():
    torch.compile(lambda x: x.sin() * 2)(torch.ones(3))
"""


@pytest.mark.parametrize(
    ("stop", "signature", "outcome", "status"),
    [
        # pytest-timeout's signal method fails the test from wherever it runs.
        (
            'pytest.fail("Timeout (>1.0s) from pytest-timeout.")',
            "Failed: Timeout (>1.0s) from pytest-timeout.",
            {"failed": 1},
            pytest.ExitCode.TESTS_FAILED,
        ),
        # Ctrl-C (and SIGTERM, which the plugin turns into it) stops the run there.
        ("raise KeyboardInterrupt", "KeyboardInterrupt: ", {}, pytest.ExitCode.INTERRUPTED),
    ],
    ids=["timeout", "ctrl-c"],
)
def test_a_plain_compile_stopped_while_its_graph_is_judged_keeps_its_row(
    pytester: pytest.Pytester,
    stop: str,
    signature: str,
    outcome: dict[str, int],
    status: pytest.ExitCode,
) -> None:
    pytester.makeconftest(STOPPING_CONFTEST.format(stop=stop))
    pytester.makepyfile(test_model=PLAIN_SUITE)
    options = (
        "--compile-accuracy",
        "--no-compile-accuracy-minify",
        "--compile-accuracy-report=report.json",
    )
    # An interrupted run leaves pytest's logging set up in the process that ran it.
    result = (
        pytester.runpytest(*options)
        if status is pytest.ExitCode.TESTS_FAILED
        else pytester.runpytest_subprocess(*options)
    )
    result.assert_outcomes(**outcome)
    assert result.ret == status
    reason = f"not judged: the check was stopped before its verdict: {signature}"
    # The summary wraps a reason at its own width, whatever the terminal's.
    summary = " ".join(line.strip() for line in result.stdout.lines)
    result.stdout.fnmatch_lines(
        [
            "*= compile accuracy =*",
            "status      ratio  graphs                 test",
            "not_judged  -      0 judged, 1 unchecked  test_model.py::test_plain",
            "    unchecked graph 0 (inference) from test_model.py:7 (test_plain): not judged: *",
            "compile accuracy: 1 check in 1 test: 1 not_judged",
        ]
    )
    assert f"unchecked graph 0 (inference) from test_model.py:7 (test_plain): {reason}" in summary
    [test] = json.loads((pytester.path / "report.json").read_text())["tests"]
    assert test["nodeid"] == "test_model.py::test_plain" and test["status"] == "not_judged"
    [check] = test["checks"]
    # The report names the graph's file relative to the rootdir, as the terminal does.
    assert check["unchecked"] == [
        f"graph 0 (inference) from test_model.py:7 (test_plain): {reason}"
    ]
    # A stopped check writes no repro.
    assert not list(pytester.path.glob("**/repro.py"))


TRAINING_SUITE = """
import torch


def test_train():
    model = torch.nn.Linear(4, 2)
    torch.compile(model)(torch.ones(3, 4)).sum().backward()
"""


def test_a_plain_training_call_stopped_while_its_gradients_are_judged_keeps_its_row(
    pytester: pytest.Pytester,
) -> None:
    # The training call is judged as the test's call ends, rerunning its compiled code: stopped there.
    pytester.makeconftest(
        STOPPING_CONFTEST.format(stop='pytest.fail("Timeout (>1.0s) from pytest-timeout.")')
        .replace('"mutated_inputs"', '"run_graph"')
        .replace("graph_calls", "torch_level")
    )
    pytester.makepyfile(test_model=TRAINING_SUITE)
    result = pytester.runpytest(
        "--compile-accuracy",
        "--no-compile-accuracy-minify",
        "--compile-accuracy-report=report.json",
    )
    result.assert_outcomes(failed=1)
    [test] = json.loads((pytester.path / "report.json").read_text())["tests"]
    [check] = test["checks"]
    assert check["unchecked"] == [
        "torch-level graph 0 from test_model.py:6 (test_train): not "
        "judged: the check was stopped before its verdict: Failed: Timeout (>1.0s) from "
        "pytest-timeout."
    ]
