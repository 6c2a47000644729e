"""The pytest hooks of the minify phase: those every process needs, and those that exist only
with pytest-xdist."""

from __future__ import annotations

from typing import Any

import pytest

from pytest_torchcompile.common.roles import Role
from pytest_torchcompile.minifying.coordinator import Coordinator
from pytest_torchcompile.minifying.queue import TESTING

RUN_KEY = "pytest_torchcompile_run"
QUEUE_KEY = "pytest_torchcompile_queue"


class ParallelHooks:
    """Hooks of the minify phase that every process needs."""

    def __init__(self, coordinator: Coordinator) -> None:
        self.coordinator = coordinator

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        if self.coordinator.role is Role.CONTROLLER:
            self.coordinator.open_queue()
        else:
            self.coordinator.join(TESTING)

    def pytest_runtest_logfinish(self) -> None:
        self.coordinator.flush()

    def pytest_keyboard_interrupt(self) -> None:
        self.coordinator.interrupted = True

    def pytest_unconfigure(self) -> None:
        self.coordinator.close()


class XdistHooks:
    """Hooks that exist only with pytest-xdist (registered only when it is active)."""

    def __init__(self, coordinator: Coordinator) -> None:
        self.coordinator = coordinator

    def pytest_configure_node(self, node: Any) -> None:
        node.workerinput[RUN_KEY] = self.coordinator.run_id
        node.workerinput[QUEUE_KEY] = str(self.coordinator.queue_dir)
