"""A plain ``torch.compile`` graph whose fp64 reference does not fit in memory: the test's row says
so (``no_fp64_reference``, with the reason) and its graph is still judged, by the labelled
same-precision rule, as the fixture's check is."""

from __future__ import annotations

import json

import pytest

pytest_plugins = ["pytester"]


@pytest.fixture(autouse=True)
def wide_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    """These tests read whole lines: a run's output wraps them at the terminal's width."""
    monkeypatch.setenv("COLUMNS", "400")


NO_ROOM_IN_FP64 = """
import contextlib

import pytest
import torch

from pytest_torchcompile.judging import references


@contextlib.contextmanager
def no_room():
    raise torch.OutOfMemoryError("out of memory: tried to allocate 64.00 GiB")
    yield


@pytest.fixture(autouse=True)
def fp64_runs_out_of_memory(monkeypatch):
    # Every fp64 run of a graph, and that alone, finds no memory.
    monkeypatch.setattr(references, "float64_everywhere", no_room)
"""

SUITE = """
import torch


def test_plain():
    x = torch.linspace(-1, 1, 64).reshape(8, 8)
    out = torch.compile(lambda x: torch.tanh(x) @ x + 1)(x)
    assert torch.allclose(out, torch.tanh(x) @ x + 1, atol=1e-5)
"""


def test_a_plain_graph_whose_fp64_run_is_out_of_memory_is_judged_without_it(
    pytester: pytest.Pytester,
) -> None:
    pytester.makeconftest(NO_ROOM_IN_FP64)
    pytester.makepyfile(test_model=SUITE)
    result = pytester.runpytest(
        "--compile-accuracy",
        "--no-compile-accuracy-intermediates",
        "--compile-accuracy-report=report.json",
        "-vv",
    )
    result.assert_outcomes(passed=1)
    assert result.ret == pytest.ExitCode.OK
    reason = (
        "the fp64 reference does not fit in memory: the graph's inputs alone take 0.00 GiB in fp64 "
        "(OutOfMemoryError: out of memory: tried to allocate 64.00 GiB)"
    )
    result.stdout.fnmatch_lines(
        [
            "*= compile accuracy =*",
            "no_fp64_reference  -      1 judged  test_model.py::test_plain",
            "    no_fp64_reference: 1 graph(s) pass",
            "      reference: same-precision cosine check: graph 0 (inference) from test_model.py:6*",
        ]
    )
    assert f"(test_plain): {reason}" in " ".join(line.strip() for line in result.stdout.lines)
    [test] = json.loads((pytester.path / "report.json").read_text())["tests"]
    assert test["status"] == "no_fp64_reference"
    [check] = test["checks"]
    assert (
        check["status"] == "no_fp64_reference"
        and check["graphs_judged"] == 1
        and check["unchecked"] == []
    )
    where = "from test_model.py:6 (test_plain)"
    # The post-AOT graph and the torch-level graph it came from, each judged without fp64.
    assert check["reference"] == (
        f"same-precision cosine check: graph 0 (inference) {where}: {reason}; "
        f"torch-level graph 0 {where}: {reason}"
    )
