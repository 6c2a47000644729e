"""Everything the plugin prints fits an 80-column terminal, and a passing test adds nothing at -v."""

from __future__ import annotations

import re

import pytest

from pytest_torchcompile.common.results import MinifyResult, StopReason
from pytest_torchcompile.reporting.layout import TerminalLayout
from pytest_torchcompile.reporting.terminal import RATIO_LEGEND

SUITE = """
import pytest
import torch

BUG = {"cpp.inject_relu_bug_TESTING_ONLY": "accuracy"}


@pytest.mark.inductor_repro(inductor_config=BUG)
def test_relu_backbone_with_a_long_descriptive_name(compile_accuracy):
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU(), torch.nn.Linear(8, 3)).eval()
    compile_accuracy(model, torch.randn(4, 8))


def test_integer_outputs_pass(compile_accuracy):
    compile_accuracy(lambda x: (x * 2).argmax(-1), torch.randn(4, 8))


@pytest.mark.inductor_repro(inductor_config=BUG)
def test_plain_compiled_relu_graph_of_a_backbone_block():
    fn = torch.compile(lambda x: torch.relu(x @ x.T) + 1)
    fn(torch.randn(6, 6))
"""

PYTEST_OWN_LINE = re.compile(r" (PASSED|FAILED) +\[ *\d+%\]$|^FAILED ")
"""pytest's own lines for a test at -v and in its short summary, which hold the whole test id."""


SECTION_HEADER = re.compile(r"^[-_=]+( .* [-_=]+)?$")


def plugin_lines(lines: list[str]) -> list[str]:
    """A run's lines without what its tests printed or logged themselves (pytest's "Captured ..."
    sections of a failure: torch's own log lines, say)."""
    kept = []
    captured = False
    for line in lines:
        if SECTION_HEADER.match(line):
            captured = line.lstrip("-").startswith(" Captured ")
        if not captured:
            kept.append(line)
    return kept


@pytest.mark.slow
def test_every_line_the_plugin_prints_fits_80_columns(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    for variable in ("CI", "BUILD_NUMBER"):  # pytest's short summary then repeats whole messages
        monkeypatch.delenv(variable, raising=False)
    path = pytester.path / "tests" / "models" / "vision" / "backbones"
    path.mkdir(parents=True)
    (path / "test_miscompiled_backbone_models.py").write_text(SUITE)
    result = pytester.runpytest_subprocess(
        "-v",
        "--no-header",
        "--compile-accuracy",
        "--no-compile-accuracy-minify",
        "-p",
        "no:pytest-shard",
        "-p",
        "no:cacheprovider",
    )
    result.assert_outcomes(passed=1, failed=2)
    lines = plugin_lines(result.stdout.lines)
    assert [line for line in lines if len(line) > 80 and not PYTEST_OWN_LINE.search(line)] == []
    # The failure table names the columns it leaves out, and the repro paths are wrapped, not cut.
    assert (
        sum("(left out at this width: rmse(eager,fp64), max|err|, at;" in line for line in lines)
        == 2
    )
    text = "\n".join(lines)
    assert (
        "rerun: python .compile-accuracy/\n  tests_models_vision_backbones_test_miscompiled" in text
    )
    # A passing test is one row; a blank ratio is explained once.
    row = next(
        index
        for index, line in enumerate(lines)
        if line.startswith("pass ") and line.split()[1] == "-"
    )
    assert not lines[row + 2].startswith("    ")
    assert text.count("ratio: worst rmse(compiled, fp64)") == 1


def test_a_minify_summary_fits_the_terminal() -> None:
    result = MinifyResult(
        50,
        1,
        43.0,
        3,
        StopReason.MINIMAL,
        path="x/minified.py",
        stage_summary="deviation appears in Inductor's C++ codegen of aten.relu "
        "(cpp.inject_relu_bug_TESTING_ONLY='accuracy')",
    )
    nodeid = "tests/models/vision/backbones/test_backbones.py::test_relu_backbone_with_a_long_descriptive_name"
    lines = TerminalLayout(80).fit(result.summary_line(nodeid)).splitlines()
    assert all(len(line) <= 80 for line in lines)
    assert lines[0].startswith("minified tests/models/vision/backbones/")
    assert [line for line in lines if line.startswith("  deviation appears")]


def test_the_legend_says_why_a_ratio_is_blank() -> None:
    assert "'-'" in RATIO_LEGEND and "allclose" in RATIO_LEGEND and "integer" in RATIO_LEGEND
