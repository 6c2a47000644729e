"""An error a compiled graph raises into a test is the test's: one it handles (a
``pytest.raises`` around a compile it expects to fail) leaves it passing, as without the plugin,
listed as information and not minified; one it does not handle fails it, as without the plugin."""

from __future__ import annotations

import json

import pytest

from tests.inline import runpytest

SUITE = """
import pytest
import torch
import torch._inductor.config


def relu_plus_one(x):
    return torch.relu(x) + 1


def test_expects_the_compile_error():
    compiled = torch.compile(relu_plus_one, fullgraph=True, backend="inductor")
    with torch._inductor.config.patch({"cpp.inject_relu_bug_TESTING_ONLY": "compile_error"}):
        with pytest.raises(Exception):
            compiled(torch.randn(8))


def test_does_not_expect_it():
    compiled = torch.compile(relu_plus_one, fullgraph=True, backend="inductor")
    with torch._inductor.config.patch({"cpp.inject_relu_bug_TESTING_ONLY": "compile_error"}):
        compiled(torch.randn(8))
"""


def outcomes(result: pytest.RunResult) -> dict[str, str]:
    return {
        line.split(" ")[1].split("::")[1]: line.split(" ")[0]
        for line in result.outlines
        if line.startswith(("PASSED ", "FAILED "))
    }


def test_an_expected_compile_error_is_the_tests(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_errors=SUITE)
    plain = runpytest(pytester, "-rA", "-p", "no:cacheprovider")
    checked = runpytest(
        pytester,
        "-rA",
        "-p",
        "no:cacheprovider",
        "--compile-accuracy",
        "--compile-accuracy-report",
        "report.json",
        "--no-compile-accuracy-minify",
    )
    assert (
        outcomes(plain)
        == outcomes(checked)
        == {"test_expects_the_compile_error": "PASSED", "test_does_not_expect_it": "FAILED"}
    )
    report = json.loads((pytester.path / "report.json").read_text())
    statuses = {
        test["nodeid"].split("::")[1]: [check["status"] for check in test["checks"]]
        for test in report["tests"]
    }
    assert statuses == {
        "test_expects_the_compile_error": ["handled_error"],
        "test_does_not_expect_it": ["fail_compile"],
    }
    handled = next(
        test for test in report["tests"] if test["nodeid"].endswith("expects_the_compile_error")
    )
    assert not handled["checks"][0]["repro_path"]
    assert "the test handled the error" in checked.stdout.str()
