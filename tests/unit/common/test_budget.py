"""The run's CPU budget: xdist workers share the machine's CPUs; a user's override wins."""

from __future__ import annotations

import os

import pytest

from pytest_torchcompile.common import budget


def test_shares_and_overrides(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(budget, "cpus", lambda: 16)
    assert budget.share(1) is None  # alone: torch's defaults
    assert [budget.share(n) for n in (2, 4, 32)] == [8, 4, 1]
    assert budget.share(4, given=3) == 3
    assert budget.share(4, given=0) is None


def test_children_limited_restores_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OMP_NUM_THREADS", "7")
    monkeypatch.delenv("TORCHINDUCTOR_COMPILE_THREADS", raising=False)
    with budget.children_limited(2):
        assert (os.environ["OMP_NUM_THREADS"], os.environ["TORCHINDUCTOR_COMPILE_THREADS"]) == (
            "2",
            "2",
        )
    assert (
        os.environ["OMP_NUM_THREADS"] == "7" and "TORCHINDUCTOR_COMPILE_THREADS" not in os.environ
    )
