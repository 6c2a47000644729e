"""A gated run decides every test as a plain run does but for the failures its checks raise: a
baseline recorded from the suite never excuses a test's own failure (its model's error in eager,
its own error after a plain ``torch.compile`` graph failed), and a recording run does not pass on
one."""

from __future__ import annotations

import pytest

from pytest_torchcompile.reporting.baseline_file import HEADER

pytest_plugins = ["pytester"]

SUITE = """
import pytest
import torch

BUG = {"cpp.inject_relu_bug_TESTING_ONLY": "accuracy"}


class Raises(torch.nn.Module):
    def forward(self, x):
        raise ValueError("the model's own error")


def test_eager_fail(compile_accuracy):
    compile_accuracy(Raises(), torch.randn(4, 8))


def test_eager_fail_handled(compile_accuracy):
    with pytest.raises(ValueError):
        compile_accuracy(Raises(), torch.randn(4, 8))


@pytest.mark.inductor_repro(inductor_config=BUG)
def test_miscompiled(compile_accuracy):
    compile_accuracy(torch.nn.ReLU(), torch.randn(4, 8))


@pytest.mark.inductor_repro(inductor_config=BUG)
def test_plain_then_own_error():
    torch.compile(lambda x: torch.relu(x) * 2)(torch.randn(4, 8))
    raise RuntimeError("the test's own error")
"""

RUN = ("--compile-accuracy", "--no-compile-accuracy-minify", "-p", "no:cacheprovider")


def test_a_baseline_excuses_only_the_failures_checks_raise(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_suite=SUITE)
    baseline = pytester.path / "baseline.txt"

    recording = pytester.runpytest(
        *RUN, f"--compile-accuracy-baseline={baseline}", "--compile-accuracy-update-baseline"
    )

    recording.assert_outcomes(passed=1, failed=3)
    # The test's own failures fail the recording run, as they fail a plain one.
    assert recording.ret == pytest.ExitCode.TESTS_FAILED
    assert baseline.read_text() == (
        f"{HEADER}\n"
        "test_suite.py::test_miscompiled\tfail_accuracy\n"
        "test_suite.py::test_plain_then_own_error\tfail_accuracy\n"
    )

    gated = pytester.runpytest(*RUN, "-rfx", f"--compile-accuracy-baseline={baseline}")

    gated.assert_outcomes(passed=1, failed=2, xfailed=1)
    gated.stdout.fnmatch_lines(
        [
            "not excused: the test failed with its own error, as in a plain*",
            "FAILED test_suite.py::test_eager_fail - ValueError: the model's own error",
            "FAILED test_suite.py::test_plain_then_own_error - RuntimeError: the test's ow*",
            "XFAIL test_suite.py::test_miscompiled - compile accuracy expected failure*",
        ]
    )
    assert gated.ret == pytest.ExitCode.TESTS_FAILED
