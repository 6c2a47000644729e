"""A training check, or a plain training call, whose gradient is wrong through the indices its
compiled forward saves (Inductor's ``adaptive_max_pool2d`` gives a window holding a NaN after its
largest finite value that value's index; eager gives the NaN's) fails with a repro of the
forward graph that is wrong only in those indices, and that graph is minified: it is a
non-floating failure, which its minifier judges. Before, the minifier judged floating outputs
only and said the repro did not reproduce, while ``python repro.py`` did."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

pytest_plugins = ["pytester"]

SUITE = """
import math

import torch


def pooled(t):
    return torch.nn.functional.adaptive_max_pool2d(t, 2)


def image():
    torch.manual_seed(0)
    x = torch.randn(1, 4, 5, 5)
    x[0, 1, 2, 3] = math.nan
    return x.requires_grad_()


def test_fixture(compile_accuracy):
    compile_accuracy(pooled, image(), backward=True)


def test_plain():
    x = image()
    torch.compile(pooled)(x).sum().backward()
"""

PROBE = """
import math, sys, torch
pool = torch.nn.functional.adaptive_max_pool1d
x = torch.tensor([[-3.0, 0.5, math.nan]])
compiled = torch.compile(lambda t: pool(t, 2, return_indices=True))(x)[1]
sys.exit(0 if torch.equal(compiled, pool(x, 2, return_indices=True)[1]) else 1)
"""


def test_gradients_wrong_through_saved_indices_are_minified(pytester: pytest.Pytester) -> None:
    # In a fresh process: a compile here would change this process's warnings filters.
    if (
        subprocess.run([sys.executable, "-c", PROBE], capture_output=True, timeout=300).returncode
        == 0
    ):
        pytest.skip("this torch gives the NaN's index compiled too")
    pytester.makepyfile(test_pooled=SUITE)
    result = pytester.runpytest(
        "--compile-accuracy",
        "-p",
        "no:cacheprovider",
        "-p",
        "no:xdist",
        "--compile-accuracy-report=report.json",
    )
    result.assert_outcomes(failed=2)
    tests = json.loads((pytester.path / "report.json").read_text())["tests"]
    failing = [check for test in tests for check in test["checks"] if check["status"] != "pass"]
    assert [check["status"] for check in failing] == ["fail_accuracy"] * 2, failing
    cases = sorted((pytester.path / ".compile-accuracy").glob("*/repro.py"))
    assert [case.parent.name.split("__")[-1] for case in cases] == ["test_fixture", "test_plain"]
    for case in cases:
        assert "NON_FLOAT_FAILURE = True" in case.read_text()
        assert (case.parent / "minified.py").exists(), result.stdout.str()
