"""Whole pytest runs from a test: in this process where they can be, in a process of their own
under xdist."""

from __future__ import annotations

import pytest


def runpytest(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    """Run pytest with ``args`` in this process (seconds faster: torch is imported already), or
    in a process of its own where ``args`` start xdist workers (``-n`` other than 0): the
    controller's workers, channels and signal handling are no run to clean up after in this one."""
    under_xdist = "-n" in args and args[args.index("-n") + 1] != "0"
    return pytester.runpytest_subprocess(*args) if under_xdist else pytester.runpytest(*args)
