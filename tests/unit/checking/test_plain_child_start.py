"""A test whose marker gives an Inductor config declares that it compiles: on a machine without
a GPU, the child that would confirm its findings starts as its call begins, before the config's
import of the compiler, which its own import then overlaps (as a fixture's check does)."""

from __future__ import annotations

import pytest
import torch

from pytest_torchcompile.checking.runner import CheckRunner
from pytest_torchcompile.common.settings import CheckSettings
from pytest_torchcompile.run.session import SESSION_KEY

RELU_BUG = {"cpp.inject_relu_bug_TESTING_ONLY": "accuracy"}


@pytest.mark.parametrize("inductor_config", [RELU_BUG, {}], ids=["marker-config", "none"])
def test_the_confirming_child_starts_as_a_configured_test_begins(
    pytester: pytest.Pytester, inductor_config: dict[str, object]
) -> None:
    config = pytester.parseconfigure("--compile-accuracy", "-p", "no:xdist")
    try:
        runner = config.stash[SESSION_KEY].runner
        assert isinstance(runner, CheckRunner)
        started: list[str | None] = []
        runner.confirmer.start = started.append  # type: ignore[method-assign]
        with runner.watch_graphs("test_x.py::test", CheckSettings(inductor_config=inductor_config)):
            pass
        gpu = torch.cuda.is_available()
        assert started == ([None] if inductor_config and not gpu else [])
    finally:
        config._ensure_unconfigure()
