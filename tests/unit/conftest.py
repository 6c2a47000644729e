"""Unit tests run in this process, and fast: a unit test that starts pytest in a process of its own
(``pytester.runpytest_subprocess``, ``python -m pytest``) fails, since a whole run belongs in
tests/runs (see tests/README.md)."""

from __future__ import annotations

import sys
from collections.abc import Generator

import pytest
from pytest_processes import PytestProcesses

_PYTEST_PROCESSES = pytest.StashKey[PytestProcesses]()


def pytest_configure(config: pytest.Config) -> None:
    # An audit hook cannot be removed: one per process, which watches only while a unit test runs.
    watch = PytestProcesses()
    config.stash[_PYTEST_PROCESSES] = watch
    sys.addaudithook(watch)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, object, object]:
    watch = item.config.stash[_PYTEST_PROCESSES]
    watch.watching, watch.started = True, []
    try:
        result = yield
    finally:
        watch.watching = False
    if watch.started:
        pytest.fail(
            f"a unit test started pytest in a process of its own ({watch.started[0]}): "
            "a whole run belongs in tests/runs",
            pytrace=False,
        )
    return result
