"""A checked run leaves Dynamo's state to the suite: code a test compiled serves a later test's
calls without a recompile, and is judged there; frame counts and compile ids read as plainly. AOT
autograd's cache stays off for a watched compile (where it answers, no lowered graph is seen to
judge, and a training call's backward could not be told apart), so its own counters are left out;
a deviation in code Dynamo compiled anew after a reset is still caught."""

from __future__ import annotations

import json

import pytest

from tests.inline import runpytest

SUITE = """
import json
import os

import pytest
import torch
import torch._dynamo.convert_frame
import torch._inductor.utils
from torch._dynamo.utils import clear_compilation_metrics, counters, get_compilation_metrics


def record(name):
    state = {
        "frames": dict(counters["frames"]),
        "stats": dict(counters["stats"]),
        "inductor": dict(counters["inductor"]),
        "frame_counter": torch._dynamo.convert_frame.FRAME_COUNTER,
        "compile_ids": [str(metrics.compile_id) for metrics in get_compilation_metrics()],
    }
    with open(f"{os.environ['RUN']}-{name}.json", "w") as file:
        json.dump(state, file, sort_keys=True)


@pytest.fixture(scope="module", autouse=True)
def own_cache():
    # Inductor's cache on disk is shared by both runs: each starts from an empty one.
    torch._dynamo.reset()
    clear_compilation_metrics()
    with torch._inductor.utils.fresh_cache():
        yield


def scaled(x):
    return (x.sin() * 2).cos() + 1


compiled = torch.compile(scaled)


def test_compiles():
    counters.clear()
    compiled(torch.randn(8))
    record("compiles")


def test_calls_again_without_a_recompile():
    frames = dict(counters["frames"])
    compiled(torch.randn(8))
    assert dict(counters["frames"]) == frames
    record("calls_again")


def test_compiles_anew_after_a_reset():
    torch._dynamo.reset()
    compiled(torch.randn(8))
    record("after_reset")
"""

RELU_BUG = """
import pytest
import torch
import torch._inductor.utils


@pytest.fixture(scope="module", autouse=True)
def own_cache():
    with torch._inductor.utils.fresh_cache():
        yield


def relu_of(x):
    return torch.relu(x) * 3


def test_compiles_the_bug():
    with torch._inductor.config.patch({"cpp.inject_relu_bug_TESTING_ONLY": "accuracy"}):
        torch.compile(relu_of)(torch.randn(64))


def test_the_cache_answers_with_the_bug():
    torch._dynamo.reset()
    with torch._inductor.config.patch({"cpp.inject_relu_bug_TESTING_ONLY": "accuracy"}):
        torch.compile(relu_of)(torch.randn(64))
"""


def test_dynamo_state_and_caches_read_as_plainly(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.makepyfile(test_suite=SUITE)
    monkeypatch.setenv("RUN", "plain")
    # Each run in a process of its own, as a suite runs: what earlier tests left of Dynamo's state
    # in this one would read as a difference.
    plain = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    monkeypatch.setenv("RUN", "checked")
    checked = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--compile-accuracy")
    plain.assert_outcomes(passed=3)
    checked.assert_outcomes(passed=3)
    for name in ("compiles", "calls_again", "after_reset"):
        states = [
            json.loads((pytester.path / f"{run}-{name}.json").read_text())
            for run in ("plain", "checked")
        ]
        assert states[1] == states[0], name


def test_a_deviation_the_cache_answers_with_is_caught(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_suite=RELU_BUG)
    report = pytester.path / "report.json"
    result = runpytest(
        pytester,
        "-p",
        "no:cacheprovider",
        "--compile-accuracy",
        "--no-compile-accuracy-minify",
        f"--compile-accuracy-report={report}",
    )
    result.assert_outcomes(failed=2)
    checks = {
        test["nodeid"].split("::")[-1]: [check["status"] for check in test["checks"]]
        for test in json.loads(report.read_text())["tests"]
    }
    assert checks["test_the_cache_answers_with_the_bug"] == ["fail_accuracy"]


REUSED_BUG = """
import torch


def relu_of(x):
    return torch.relu(x) * 3


compiled = torch.compile(relu_of)


def test_compiles_the_bug():
    with torch._inductor.config.patch({"cpp.inject_relu_bug_TESTING_ONLY": "accuracy"}):
        compiled(torch.randn(64))


def test_calls_it_again():
    compiled(torch.randn(64))


def test_calls_nothing_compiled():
    torch.relu(torch.randn(64))
"""


def test_code_an_earlier_test_compiled_is_judged_where_a_later_test_calls_it(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(test_suite=REUSED_BUG)
    report = pytester.path / "report.json"
    result = runpytest(
        pytester,
        "-p",
        "no:cacheprovider",
        "--compile-accuracy",
        "--no-compile-accuracy-minify",
        f"--compile-accuracy-report={report}",
    )
    result.assert_outcomes(failed=2, passed=1)
    checks = {
        test["nodeid"].split("::")[-1]: [check["status"] for check in test["checks"]]
        for test in json.loads(report.read_text())["tests"]
    }
    assert checks["test_calls_it_again"] == ["fail_accuracy"]
    assert checks.get("test_calls_nothing_compiled", []) == []
