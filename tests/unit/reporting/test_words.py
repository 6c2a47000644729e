"""Figures come with words: counts in the singular where there is one, the minify line's compiles
told apart from the stage's, a figure never parted from its unit at a line break."""

from __future__ import annotations

import itertools

from pytest_torchcompile.common.results import CaseResult, MinifyResult, StopReason
from pytest_torchcompile.common.verdict import Status
from pytest_torchcompile.reporting.cells import checks_summary
from pytest_torchcompile.reporting.layout import TerminalLayout


def test_one_check_in_one_test_is_said_in_the_singular() -> None:
    assert checks_summary([CaseResult("t.py::a", Status.PASS)]) == "1 check in 1 test: 1 pass"
    two = [CaseResult("t.py::a", Status.PASS), CaseResult("t.py::a", Status.FAIL_ACCURACY)]
    assert checks_summary(two) == "2 checks in 1 test: 1 pass, 1 fail_accuracy"


def _minified(seconds: float) -> MinifyResult:
    return MinifyResult(
        114,
        1,
        seconds,
        3,
        StopReason.MINIMAL,
        path="x/minified.py",
        stage_summary="deviation appears in Inductor's C++ codegen of aten.relu",
        stage_compiles=5,
        stage_seconds=2.0,
    )


def test_the_stage_line_says_its_compiles_come_after_the_minification() -> None:
    first, stage = _minified(4.1).summary_line("t.py::a").splitlines()
    assert first == "minified t.py::a: 114 -> 1 ops in 4.1 s, 3 compiles"
    assert stage == (
        "  deviation appears in Inductor's C++ codegen of aten.relu "
        "(stage found in 5 more compiles, 2.0 s)"
    )


def test_a_figure_stays_with_its_unit_at_any_width() -> None:
    for length in range(20, 80):
        nodeid = f"tests/test_models.py::test_{'x' * length}"
        lines = TerminalLayout(80).fit(_minified(13.5).summary_line(nodeid)).splitlines()
        assert all(len(line) <= 80 for line in lines)
        for line, following in itertools.pairwise(lines):
            assert not (
                line[-1:].isdigit() and following.lstrip().startswith(("s", "ops", "comp"))
            ), lines
