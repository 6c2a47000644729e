"""Every line a baseline-gated run prints fits an 80-column terminal: the outcomes, the rows of
removed tests, why the run fails, the files written, the recording run's lines."""

from __future__ import annotations

import re

import pytest
from test_terminal_width import plugin_lines

SUITE = """
import pytest
import torch

BUG = {"cpp.inject_relu_bug_TESTING_ONLY": "accuracy"}


def backbone():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU(), torch.nn.Linear(8, 3)).eval()


@pytest.mark.inductor_repro(inductor_config=BUG)
def test_recorded_relu_failure_of_a_backbone_block_with_a_long_name(compile_accuracy):
    compile_accuracy(backbone(), torch.randn(4, 8))


@pytest.mark.inductor_repro(inductor_config=BUG)
def test_new_relu_failure_of_a_backbone_block_with_a_long_descriptive_name(compile_accuracy):
    compile_accuracy(backbone(), torch.randn(4, 8))


def test_fixed_relu_failure_of_a_backbone_block_with_a_long_descriptive_name(compile_accuracy):
    compile_accuracy(backbone(), torch.randn(4, 8))


def test_a_backbone_block_with_a_long_descriptive_name_not_in_the_baseline(compile_accuracy):
    compile_accuracy(backbone(), torch.randn(4, 8))
"""

TEST_FILE = "tests/models/vision/backbones/test_miscompiled_backbone_models.py"

BASELINE = (
    f"{TEST_FILE}::test_recorded_relu_failure_of_a_backbone_block_with_a_long_name\tfail_accuracy\t"
    "https://github.com/pytorch/pytorch/issues/123456 relu lowering on AVX-512\n"
    f"{TEST_FILE}::test_new_relu_failure_of_a_backbone_block_with_a_long_descriptive_name\tpass\n"
    f"{TEST_FILE}::test_fixed_relu_failure_of_a_backbone_block_with_a_long_descriptive_name\tfail_accuracy\t"
    "https://github.com/pytorch/pytorch/issues/654321\n"
    f"{TEST_FILE}::test_a_backbone_block_that_was_removed_from_the_suite_long_ago\tpass\n"
)

BASELINE_PATH = "ci/compile-accuracy/baselines/cpu/nightly/torch-nightly-cpu-baseline.txt"
REPORT_PATH = "ci/compile-accuracy/reports/cpu/nightly/torch-nightly-cpu-report.json"

PYTEST_OWN_LINE = re.compile(r" (PASSED|FAILED|XFAIL)\b.*\[ *\d+%\]$|^(FAILED|XFAIL) ")
"""pytest's own lines for a test at -v and in its short summary, which hold the whole test id."""


def long_lines(result: pytest.RunResult) -> list[str]:
    return [
        line
        for line in plugin_lines(result.stdout.lines)
        if len(line) > 80 and not PYTEST_OWN_LINE.search(line)
    ]


@pytest.mark.slow
def test_every_line_of_a_gated_run_fits_80_columns(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    for variable in ("CI", "BUILD_NUMBER"):  # pytest's short summary then repeats whole messages
        monkeypatch.delenv(variable, raising=False)
    test_file = pytester.path / TEST_FILE
    test_file.parent.mkdir(parents=True)
    test_file.write_text(SUITE)
    baseline = pytester.path / BASELINE_PATH
    baseline.parent.mkdir(parents=True)
    baseline.write_text(BASELINE)
    common = (
        "-v",
        "--no-header",
        "--compile-accuracy",
        "--no-compile-accuracy-minify",
        "-p",
        "no:pytest-shard",
        "-p",
        "no:cacheprovider",
        "-p",
        "no:xdist",
        "--compile-accuracy-baseline",
        BASELINE_PATH,
        "--compile-accuracy-report",
        REPORT_PATH,
    )

    gated = pytester.runpytest_subprocess(*common, "--compile-accuracy-strict")
    gated.assert_outcomes(passed=2, failed=1, xfailed=1)
    assert long_lines(gated) == []
    text = "\n".join(gated.stdout.lines)
    # Each kind of line was printed, so that the check above covers it.
    for said in (
        "NEW FAILURE tests/models/vision/backbones/",
        "IMPROVED tests/models/vision/backbones/",
        "missing tests/models/vision/backbones/",
        f"{BASELINE_PATH}:4:\n  unknown test id",
        "compile accuracy: the run fails against the baseline:",
        "JSON report written to",
        "NEW FAILURE: fail_accuracy, the baseline expects pass",
    ):
        assert said in text, said

    recording = pytester.runpytest_subprocess(*common, "--compile-accuracy-update-baseline")
    assert recording.ret == 0
    assert long_lines(recording) == []
    text = "\n".join(recording.stdout.lines)
    for said in ("baseline written to", "recording run: 1 test failure(s)"):
        assert said in text, said
