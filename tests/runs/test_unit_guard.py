"""tests/unit/conftest.py fails a unit test that starts pytest in a process of its own, and only
such a test: played with a copy of it in a suite of its own."""

from __future__ import annotations

from pathlib import Path

import pytest

TESTS = Path(__file__).parents[1]

UNIT_TESTS = """
import subprocess, sys


def test_python_m_pytest():
    subprocess.run([sys.executable, "-m", "pytest", "--version"], capture_output=True, check=True)


def test_runpytest_subprocess(pytester):
    pytester.runpytest_subprocess("--version")


def test_another_process():
    subprocess.run([sys.executable, "-c", "pass"], check=True)
"""


def test_a_unit_test_that_starts_pytest_in_a_process_fails(pytester: pytest.Pytester) -> None:
    pytester.makeconftest("")
    pytester.makepyfile(pytest_processes=(TESTS / "pytest_processes.py").read_text())
    unit = pytester.mkdir("unit")
    (unit / "conftest.py").write_text((TESTS / "unit" / "conftest.py").read_text())
    (unit / "test_guarded.py").write_text(UNIT_TESTS)

    # A process of its own: the copied conftest adds an audit hook, which no run can remove.
    result = pytester.runpytest_subprocess(
        "-p", "pytester", "-p", "no:cacheprovider", "-p", "no:xdist", "-rf"
    )

    result.assert_outcomes(passed=1, failed=2)
    result.stdout.fnmatch_lines(
        [
            "FAILED unit/test_guarded.py::test_python_m_pytest*",
            "FAILED unit/test_guarded.py::test_runpytest_subprocess*",
        ]
    )
    for command in ("'-m', 'pytest'", "'-mpytest'"):
        result.stdout.fnmatch_lines(
            [
                f"a unit test started pytest in a process of its own (*{command}*): "
                "a whole run belongs in tests/runs"
            ]
        )
