"""Whole runs given paths that are not regular files: a report on a device is written through
(and a full one fails the run in one line), never replaced; a baseline that never ends is a
one-line usage error before any test."""

from __future__ import annotations

import os
import stat

import pytest

pytest_plugins = ["pytester"]


@pytest.fixture(autouse=True)
def wide_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    """These tests read whole lines: a run's output wraps them at the terminal's width."""
    monkeypatch.setenv("COLUMNS", "400")


SUITE = """
def test_plain():
    pass
"""


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full")
def test_a_report_on_a_full_device_fails_the_run_in_one_line(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_model=SUITE)
    result = pytester.runpytest("--compile-accuracy-report=/dev/full")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(
        [
            "compile accuracy: the run fails:",
            "  cannot write the JSON report /dev/full: No space left on device",
        ]
    )
    assert "written to /dev/full" not in result.stdout.str()
    assert stat.S_ISCHR(os.stat("/dev/full").st_mode)


def test_a_baseline_that_never_ends_is_a_one_line_usage_error(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_model=SUITE)
    result = pytester.runpytest("--compile-accuracy-baseline=/dev/zero")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert result.stderr.lines[0] == (
        "ERROR: compile accuracy baseline: /dev/zero: not a regular file: a baseline is a text file"
    )
    assert "MemoryError" not in result.stdout.str() + result.stderr.str()
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()
