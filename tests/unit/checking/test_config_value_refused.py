"""An Inductor config value the compile raises on (Inductor's ``unrecognized config NAME =
VALUE``) is the setting's fault: a usage error naming the value and its source, with no result
recorded and no repro written, for the fixture's check and for a marked test's own compile."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from pytest_torchcompile.checking.runner import CheckRunner
from pytest_torchcompile.common.allowed import ConfigValueRefused
from pytest_torchcompile.common.settings import CheckSettings
from pytest_torchcompile.reporting.layout import TerminalLayout
from pytest_torchcompile.run.session import AccuracySession
from pytest_torchcompile.torch_internals.compiling import reset

TYPO = {"cpp.inject_relu_bug_TESTING_ONLY": "acuracy"}
UNRECOGNIZED = "unrecognized config cpp.inject_relu_bug_TESTING_ONLY = 'acuracy'"


def model() -> torch.nn.Module:
    return torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU()).eval()


@pytest.fixture
def session(tmp_path: Path) -> Iterator[AccuracySession]:
    state = AccuracySession(True, tmp_path / "repros", CheckSettings(), lambda: {})
    (tmp_path / "repros").mkdir()
    state.runner = CheckRunner.start(state, TerminalLayout(), trace_log=True, probe_child=False)
    # No judging child: nothing here is judged in one.
    state.runner.confirmer.start = lambda device: None  # type: ignore[method-assign]
    try:
        yield state
    finally:
        state.runner.close()


def _written(state: AccuracySession) -> list[str]:
    return sorted(path.name for path in state.repro_root.iterdir() if not path.name.startswith("."))


def test_the_fixtures_check_raises_the_setting_and_records_nothing(
    session: AccuracySession,
) -> None:
    with pytest.raises(ConfigValueRefused) as refused:
        session.check(
            "test_x.py::test",
            model(),
            (torch.randn(4, 8),),
            {},
            CheckSettings(inductor_config=TYPO),
        )
    assert refused.value.line("compile_accuracy").startswith(
        "compile_accuracy(inductor_config={'cpp.inject_relu_bug_TESTING_ONLY': ...}): "
        f"'acuracy' is not allowed (compiling raised InductorError: AssertionError: {UNRECOGNIZED})"
    )
    assert session.results == () and _written(session) == []


def test_a_marked_tests_own_compile_fails_it_with_the_setting_and_records_nothing(
    session: AccuracySession,
) -> None:
    runner = session.runner
    assert isinstance(runner, CheckRunner)
    reset()
    with (
        pytest.raises(pytest.fail.Exception) as failed,
        runner.running_test("test_x.py::test", CheckSettings(inductor_config=TYPO), watch=True),
    ):
        torch.compile(model())(torch.randn(4, 8))
    reset()
    assert str(failed.value).startswith(
        "@pytest.mark.inductor_repro(inductor_config={'cpp.inject_relu_bug_TESTING_ONLY': ...}): "
        "'acuracy' is not allowed (compiling raised"
    )
    assert failed.value.__suppress_context__
    assert session.results == () and _written(session) == []
