"""A single process with no device of its own minifies a case on the device its confirmation
judged it on: the confirming child (warm) is the one handed over, and the minify phase's judge
asks for that device, so that it adopts it."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_torchcompile.checking.runner import CheckRunner
from pytest_torchcompile.common.run_state import MinifyJob
from pytest_torchcompile.judging.isolation.parent import SpareChildren
from pytest_torchcompile.minifying.coordinator import COORDINATOR_KEY
from pytest_torchcompile.run.session import SESSION_KEY


@pytest.mark.parametrize("handed_over", [True, False])
def test_the_case_is_minified_on_the_device_its_confirmation_used(
    pytester: pytest.Pytester, tmp_path: Path, handed_over: bool
) -> None:
    repro = tmp_path / "repro.py"
    repro.write_text("torch._inductor.config.cpp.inject_relu_bug_TESTING_ONLY = 'accuracy'\n")
    config = pytester.parseconfigure("--compile-accuracy", "-p", "no:xdist")
    try:
        coordinator, state = config.stash[COORDINATOR_KEY], config.stash[SESSION_KEY]
        assert coordinator.device is None
        runner = state.runner
        assert isinstance(runner, CheckRunner)
        runner.confirmer.devices[str(repro)] = "cuda:1"
        asked: list[str | None] = []

        def hand_over(config_source: str, device: str | None, spares: SpareChildren) -> bool:
            asked.append(device)
            return handed_over

        runner.confirmer.hand_over = hand_over  # type: ignore[method-assign]
        coordinator.spares = SpareChildren()
        coordinator.spares.prestart = lambda *args: None  # type: ignore[method-assign]
        assert state.on_minify_job is not None
        state.on_minify_job(MinifyJob("case", "test_x.py::test", str(repro), 10.0))
        assert asked == ["cuda:1"]
        assert coordinator.job_devices == ({str(repro): "cuda:1"} if handed_over else {})
    finally:
        config._ensure_unconfigure()
