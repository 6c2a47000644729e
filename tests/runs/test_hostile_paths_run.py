"""Whole runs given paths that are not regular files: a report on a device is written through
(and a full one fails the run in one line), never replaced; a baseline that never ends is a
one-line usage error before any test."""

from __future__ import annotations

import os
import stat
import tempfile

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


def test_reports_on_devices_and_repros_under_dev_leave_a_passing_run_passing(
    pytester: pytest.Pytester,
) -> None:
    if not os.path.isdir("/dev/shm") or not os.access("/dev/shm", os.W_OK):
        pytest.skip("no writable /dev/shm")
    pytester.makepyfile(test_model=SUITE)
    with tempfile.TemporaryDirectory(dir="/dev/shm") as under_dev:
        result = pytester.runpytest(
            "--compile-accuracy",
            f"--compile-accuracy-dir={under_dev}/repros",
            "--compile-accuracy-report=/dev/null",
            "--compile-accuracy-html=/dev/null",
        )
        left = os.listdir(under_dev)
    assert result.ret == pytest.ExitCode.OK, result.stdout.str() + result.stderr.str()
    assert "Traceback" not in result.stdout.str() + result.stderr.str()
    result.stdout.fnmatch_lines(
        ["JSON report written to /dev/null", "HTML report written to /dev/null", "*1 passed*"]
    )
    assert left == []
