"""Settings and fixtures for this repository's own test suite. Imports no torch: a test that
needs none (the run layer's, the dependency rule's) runs without it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest
from hypothesis import HealthCheck, settings

if TYPE_CHECKING:
    from pytest_torchcompile.checking.masked import ProbeChildren
    from pytest_torchcompile.judging.judge import GraphVerdict

# Compiling a graph takes about a second on a CPU: hypothesis' default deadline would flag it.
settings.register_profile(
    "repo", deadline=None, suppress_health_check=[HealthCheck.too_slow], print_blob=True,
)
settings.load_profile("repo")


@pytest.fixture
def probe_children() -> Iterator[ProbeChildren]:
    """Children for a check's probes, ended after the test."""
    from pytest_torchcompile.checking.masked import ProbeChildren

    children = ProbeChildren()
    yield children
    children.close()


@pytest.fixture
def child_verdicts(monkeypatch: pytest.MonkeyPatch) -> list[GraphVerdict]:
    """Every probe verdict a child gives, with probes sent to a child whatever their size."""
    from pytest_torchcompile.checking.masked import CONCURRENT_PROBE_ENV
    from pytest_torchcompile.judging.isolation.parent import IsolatedJudge

    monkeypatch.setenv(CONCURRENT_PROBE_ENV, "1")
    verdicts: list[GraphVerdict] = []
    judge_prepared = IsolatedJudge.judge_prepared

    def recorded(self: IsolatedJudge, *args: object) -> GraphVerdict:
        verdicts.append(judge_prepared(self, *args))  # type: ignore[arg-type]
        return verdicts[-1]

    monkeypatch.setattr(IsolatedJudge, "judge_prepared", recorded)
    return verdicts
