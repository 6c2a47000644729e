"""Real Inductor wrong-result bugs from PyTorch's issue tracker, each written as a user's tests:
one through the ``compile_accuracy`` fixture, one with a plain ``torch.compile`` call.

The bugs are silent: the user tests pass without ``--compile-accuracy`` and are meant to fail
under it. The suite's own run therefore leaves this folder out; ``tests/test_realbugs.py`` runs
each module with ``--compile-accuracy`` and records what the plugin made of it. By hand:
``pytest tests/realbugs --compile-accuracy``."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_torchcompile.common.options import option, option_value

MARKER = (
    "realbug(issue, fixed_in=None): a real Inductor bug, pytorch/pytorch#<issue>; fixed_in: the "
    "first torch release found without it (None: not fixed as of the newest release checked)"
)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", MARKER)


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    if collection_path.name.startswith("test_") and not option_value(
        config, option("compile-accuracy")
    ):
        return True
    return None
