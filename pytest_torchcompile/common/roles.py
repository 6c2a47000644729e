"""Which part of a run this process plays: the only process, an xdist controller (runs no test,
gathers and reports), or an xdist worker (runs tests, reports to the controller)."""

from __future__ import annotations

import enum
import os
from typing import Any

import pytest


class Role(enum.StrEnum):
    SINGLE = "single"
    CONTROLLER = "controller"
    WORKER = "worker"


def role_of(config: pytest.Config) -> Role:
    if hasattr(config, "workerinput"):
        return Role.WORKER
    # The option, not xdist's dsession plugin: asked at configure, before xdist registers it.
    return Role.CONTROLLER if getattr(config.option, "dist", "no") != "no" else Role.SINGLE


def worker_count(config: pytest.Config) -> int:
    """How many xdist workers this run has (1 without xdist, and on the controller)."""
    workerinput: dict[str, Any] | None = getattr(config, "workerinput", None)
    if workerinput is None:
        return 1
    count = workerinput.get("workercount") or os.environ.get("PYTEST_XDIST_WORKER_COUNT") or 1
    return int(count)
