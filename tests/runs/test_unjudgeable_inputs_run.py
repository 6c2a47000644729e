"""Inputs the check cannot judge (a sparse COO tensor): the fixture's check gets ``not_judged``
with its reason and the test keeps its own outcome; a plain ``torch.compile`` call of a watched
test runs as it would without the plugin. Never a crash inside the test."""

from __future__ import annotations

import json

import pytest

pytest_plugins = ["pytester"]

SUITE = """
import torch


def sparse():
    return torch.sparse_coo_tensor([[0, 1], [1, 0]], [1.0, 2.0], (2, 2))


def multiply(a, b):
    return torch.sparse.mm(a, b) + 1


def test_fixture(compile_accuracy):
    out = compile_accuracy(multiply, sparse(), torch.ones(2, 2))
    assert torch.equal(out, torch.tensor([[2.0, 2.0], [3.0, 3.0]]))


def test_plain():
    out = torch.compile(multiply)(sparse(), torch.ones(2, 2))
    assert torch.equal(out, torch.tensor([[2.0, 2.0], [3.0, 3.0]]))
"""


def test_a_sparse_input_is_not_judged_with_its_reason(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_model=SUITE)
    report = pytester.path / "report.json"
    result = pytester.runpytest(
        "--compile-accuracy",
        "--compile-accuracy-scope=all",
        f"--compile-accuracy-report={report}",
        "-W",
        "ignore::UserWarning",
    )
    result.assert_outcomes(passed=2)
    output = result.stdout.str()
    assert "Traceback" not in output and "NotImplementedError" not in output, output
    result.stdout.fnmatch_lines(
        [
            "*not_judged*test_model.py::test_fixture",
            "    not_judged: args[[]0[]] holds a tensor of layout torch.sparse_coo*",
        ]
    )
    checks = {test["nodeid"]: test for test in json.loads(report.read_text())["tests"]}
    fixture = checks["test_model.py::test_fixture"]
    assert fixture["status"] == "not_judged"
    assert fixture["checks"][0]["message"] == (
        "args[0] holds a tensor of layout torch.sparse_coo, which the check cannot compare; "
        "the model ran eagerly"
    )
    assert not (pytester.path / ".compile-accuracy").exists() or not any(
        path.name.startswith("test_") for path in (pytester.path / ".compile-accuracy").iterdir()
    )
