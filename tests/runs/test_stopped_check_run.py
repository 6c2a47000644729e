"""A check stopped from outside the model, as pytest-timeout's signal method stops a test (it
calls ``pytest.fail`` from wherever the test is): the test fails as told, and the compile accuracy
section keeps a row for it saying that its check was stopped, rather than a bare header."""

from __future__ import annotations

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
    result.stdout.fnmatch_lines([
        "*= compile accuracy =*",
        "status      ratio  test",
        "not_judged  -      test_model.py::test_slow",
        "    not_judged: the check was stopped before its verdict: Failed: Timeout (>1.0s) from pytest-timeout.",
    ])


STOPPING_CONFTEST = """
import pytest
from pytest_torchcompile.checking import plain


def stopped(*args, **kwargs):
    pytest.fail("Timeout (>1.0s) from pytest-timeout.")


# The timeout fires while the plugin judges a graph of the test's own compile.
plain.reference_outputs = stopped
"""

PLAIN_SUITE = """
import pytest
import torch


@pytest.mark.inductor_repro
def test_plain():
    torch.compile(lambda x: x.sin() * 2)(torch.ones(3))
"""


def test_a_plain_compile_stopped_while_its_graph_is_judged_keeps_its_row(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(STOPPING_CONFTEST)
    pytester.makepyfile(test_model=PLAIN_SUITE)
    before = {path.name for path in pytester.path.iterdir()}
    result = pytester.runpytest("--compile-accuracy", "--no-compile-accuracy-minify")
    result.assert_outcomes(failed=1)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines([
        "*= compile accuracy =*",
        "not_judged  -      test_model.py::test_plain",
        "*graph 0 (inference) from *: not judged: the check was stopped before its verdict: Failed: Timeout (>1.0s) "
        "from pytest-timeout.",
    ])
    # A stopped check writes no repro: the run's files are those it had.
    assert {path.name for path in pytester.path.iterdir()} - before <= {"__pycache__"}
