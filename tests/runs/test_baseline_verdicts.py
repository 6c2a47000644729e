"""A run against a baseline that finds a new failure and an improvement: the new failure fails
the run, the improvement does not. The lighter twin of test_gating's round trip (``slow``), in
one run."""

from __future__ import annotations

import pytest

pytest_plugins = ["pytester"]

SUITE = """
import pytest, torch


def mlp():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))


def test_fixed(compile_accuracy):
    compile_accuracy(mlp(), torch.randn(4, 8))


@pytest.mark.inductor_repro(inductor_config={"cpp.inject_relu_bug_TESTING_ONLY": "accuracy"})
def test_broken(compile_accuracy):
    compile_accuracy(mlp(), torch.randn(4, 8))
"""


def test_a_new_failure_fails_the_run_and_an_improvement_does_not(
    pytester: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("COLUMNS", "200")  # each verdict on one line
    pytester.makepyfile(test_models=SUITE)
    baseline = pytester.path / "baseline.txt"
    baseline.write_text(
        "test_models.py::test_fixed\tfail_accuracy\tbug 1\ntest_models.py::test_broken\tpass\n"
    )
    result = pytester.runpytest(
        "--compile-accuracy",
        "--no-compile-accuracy-minify",
        "-p",
        "no:cacheprovider",
        "--compile-accuracy-baseline",
        "baseline.txt",
    )
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        [
            "NEW FAILURE: fail_accuracy, the baseline expects pass (baseline baseline.txt:2)",  # under the rootdir
            "baseline: 1 NEW FAILURE, 1 IMPROVED",
            "  NEW FAILURE test_models.py::test_broken: fail_accuracy, the baseline expects pass",
            "compile accuracy: the run fails against the baseline:",
            "FAILED test_models.py::test_broken - *",
        ]
    )
    result.stdout.no_fnmatch_line("*IMPROVED test_models.py::test_fixed*strict*")
    assert baseline.read_text().count("\n") == 2, (
        "only --compile-accuracy-update-baseline writes the file"
    )
