"""A run with --compile-accuracy quiets torch's trace logger for its tests and gives the logger
its level back at its end: a process that runs pytest again (an IDE, pytester) finds it as it
was."""

from __future__ import annotations

import logging

import pytest

pytest_plugins = ["pytester"]


def test_a_run_gives_the_trace_logger_its_level_back(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("TORCH_TRACE", raising=False)
    logger = logging.getLogger("torch.__trace")
    monkeypatch.setattr(logger, "level", logging.DEBUG)
    pytester.makepyfile("def test_nothing():\n    pass\n")
    pytester.runpytest_inprocess(
        "--compile-accuracy", "-p", "no:cacheprovider", "-p", "no:xdist"
    ).assert_outcomes(passed=1)
    assert logger.level == logging.DEBUG
