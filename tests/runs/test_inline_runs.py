"""tests/conftest.py keeps the libraries an in-process run imports in ``sys.modules``: pytester
drops whatever a run imported, and torch imported a second time beside itself crashes the
process. A run's own test modules still go."""

from __future__ import annotations

import sys

import pytest

SELDOM_IMPORTED = ("tabnanny", "pyclbr", "mailbox", "wave", "netrc", "sched", "shelve", "fileinput")


def test_a_library_a_run_imports_stays_imported_after_it(pytester: pytest.Pytester) -> None:
    library = next(name for name in SELDOM_IMPORTED if name not in sys.modules)
    pytester.makepyfile(f"import {library}\n\ndef test_imports():\n    pass\n")

    pytester.runpytest_inprocess().assert_outcomes(passed=1)
    imported = sys.modules[library]
    pytester.runpytest_inprocess().assert_outcomes(passed=1)

    assert sys.modules[library] is imported


def test_a_runs_own_test_module_does_not_stay(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_own_module="def test_passes():\n    pass\n")

    pytester.runpytest_inprocess().assert_outcomes(passed=1)

    assert "test_own_module" not in sys.modules
