"""The fixture's check leaves what the test sees as the plain fixture does: a ``train()`` model's
running statistics and step count, the inputs it writes into, torch's random stream (its
dropout's draws) and the value the call returns, bitwise; its logs hold the plain call's records. The check worked on copies and kept the
generators, so a test that asserts on any of them failed only under ``--compile-accuracy``."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import pytest
import torch

from pytest_torchcompile.checking.runner import CheckRunner
from pytest_torchcompile.common.results import CaseResult
from pytest_torchcompile.common.run_state import RunState
from pytest_torchcompile.common.settings import CheckSettings
from pytest_torchcompile.common.verdict import Status
from pytest_torchcompile.reporting.layout import TerminalLayout
from pytest_torchcompile.run.session import AccuracySession
from pytest_torchcompile.torch_internals.threads import compile_workers


class Recorded:
    """The part of a run's state a passing or unjudged check uses: what it records."""

    def __init__(self) -> None:
        self.results: list[CaseResult] = []

    def record(self, *results: CaseResult) -> None:
        self.results += results


@pytest.fixture
def runner() -> Iterator[CheckRunner]:
    checking = CheckRunner(cast(RunState, Recorded()), TerminalLayout())
    checking.confirmer.start = lambda device: None  # type: ignore[method-assign]
    try:
        yield checking
    finally:
        checking.close()


def _statuses(runner: CheckRunner) -> list[Status]:
    return [result.status for result in cast(Recorded, runner.session).results]


class Block(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear, self.norm = torch.nn.Linear(4, 8), torch.nn.BatchNorm1d(8)
        self.dropout = torch.nn.Dropout(0.5)

    def forward(self, x: torch.Tensor, seen: torch.Tensor) -> torch.Tensor:
        seen.add_(1)
        return self.dropout(self.norm(self.linear(x)))


def _called(call: Any) -> tuple[torch.Tensor, dict[str, torch.Tensor], torch.Tensor, torch.Tensor]:
    torch.manual_seed(0)
    model, x, seen = Block().train(), torch.randn(16, 4), torch.zeros(3)
    torch.manual_seed(123)
    out = call(model, x, seen)
    return out, model.state_dict(), seen, torch.rand(3)


def test_a_checked_call_leaves_what_a_plain_call_leaves(runner: CheckRunner) -> None:
    plain = _called(lambda model, x, seen: model(x, seen))
    checked = _called(
        lambda model, x, seen: runner.check(
            "test_x.py::test", model, (x, seen), {}, CheckSettings(intermediates=False)
        )
    )
    assert _statuses(runner) == [Status.PASS]
    out, state, seen, drawn = plain
    assert torch.equal(checked[0], out) and torch.equal(checked[2], seen)
    assert torch.equal(checked[3], drawn)
    assert state.keys() == checked[1].keys()
    assert all(torch.equal(checked[1][name], value) for name, value in state.items())


class Uncopyable(torch.nn.Module):
    def __deepcopy__(self, memo: dict[int, Any]) -> Uncopyable:
        raise TypeError("this module refuses copies")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * 2


def test_a_model_only_the_checks_copies_fail_is_not_judged_and_runs(runner: CheckRunner) -> None:
    out = runner.check("test_x.py::test", Uncopyable(), (torch.ones(2),), {}, CheckSettings())
    assert torch.equal(out, torch.full((2,), 2.0))
    [result] = cast(Recorded, runner.session).results
    assert result.status is Status.NOT_JUDGED
    assert result.message == (
        "the model raised when run eagerly: TypeError: this module refuses copies, "
        "where a plain call does not: the model ran plainly"
    )


def test_a_model_that_raises_raises_its_plain_calls_error(runner: CheckRunner) -> None:
    calls: list[torch.Tensor] = []

    def broken(x: torch.Tensor) -> torch.Tensor:
        calls.append(x)
        raise ValueError("broken model")

    x = torch.ones(2)
    with pytest.raises(ValueError, match="broken model"):
        runner.check("test_x.py::test", broken, (x,), {}, CheckSettings())
    assert calls[-1] is x
    assert _statuses(runner) == [Status.EAGER_FAIL]


class Logs(torch.nn.Module):
    """Logs as it runs, as a model's own code may."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        logging.getLogger("mymodel").warning("forward")
        return torch.relu(x)


def _logged(caplog: pytest.LogCaptureFixture) -> list[tuple[str, str]]:
    """The records of this thread and of Inductor's compile workers, where the check's runs and
    compiles log: another thread's (one an earlier test left running) are not the check's."""
    ours = {threading.get_ident(), *compile_workers()}
    return [
        (record.name, record.getMessage()) for record in caplog.records if record.thread in ours
    ]


def test_a_checked_call_logs_what_a_plain_call_logs(
    runner: CheckRunner, caplog: pytest.LogCaptureFixture
) -> None:
    """The check's runs of the model (eager twice, fp64, Dynamo's tracing) and its compiles
    (Dynamo's warning of a graph break at a ``momentum=None`` BatchNorm's ``.item()``, the file
    locks of Inductor's cache) log nothing a test's ``caplog`` holds: only the plain call's
    records are there, as in a plain run."""
    caplog.set_level(logging.DEBUG)
    model = torch.nn.Sequential(Logs(), torch.nn.BatchNorm1d(4, momentum=None)).train()
    runner.check(
        "test_x.py::test", model, (torch.randn(8, 4),), {}, CheckSettings(intermediates=False)
    )
    assert _statuses(runner) == [Status.PASS]
    assert _logged(caplog) == [("mymodel", "forward")]


def test_a_failing_check_fails_the_test_after_the_plain_call_and_logs_its_records_alone(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The failing test's report ("Captured log call") holds the plain call's records: what the
    test's model logs, once, as a plain run logs it."""
    session = AccuracySession(True, tmp_path / "repros", CheckSettings(), lambda: {})
    checking = CheckRunner(session, TerminalLayout())
    checking.confirmer.start = lambda device: None  # type: ignore[method-assign]
    checking.confirmer.unreproduced = lambda path: None  # type: ignore[method-assign]
    settings = CheckSettings(
        inductor_config={"cpp.inject_relu_bug_TESTING_ONLY": "accuracy"},
        intermediates=False,
        minify=False,
    )
    x = torch.randn(64)
    try:
        with pytest.raises(pytest.fail.Exception, match="fail_accuracy"):
            checking.check("test_x.py::test", Logs(), (x,), {}, settings)
    finally:
        checking.close()
    assert [result.status for result in session.results] == [Status.FAIL_ACCURACY]
    assert _logged(caplog) == [("mymodel", "forward")]


class Counted(torch.nn.Module):
    """Keeps state outside tensors: a class-level count of its calls, which its output may
    read."""

    calls = 0

    def __init__(self, reads_count: bool) -> None:
        super().__init__()
        self.reads_count = reads_count

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        type(self).calls += 1
        return x * type(self).calls if self.reads_count else x * 2


@pytest.mark.parametrize(
    ("reads_count", "sizes", "status", "calls"),
    [
        (False, None, Status.PASS, 5),
        (False, ((torch.ones(5),),), Status.PASS, 8),
        (True, None, Status.EAGER_NONDETERMINISTIC, 7),
    ],
    ids=["count unread", "another size", "output reads the count"],
)
def test_state_outside_tensors_changes_with_each_run_and_the_test_still_passes(
    runner: CheckRunner,
    reads_count: bool,
    sizes: tuple[tuple[torch.Tensor]] | None,
    status: Status,
    calls: int,
) -> None:
    """No copy puts back what the model's Python code changes outside tensors: a passing check
    runs it four times besides the caller's call (eager twice, fp64, Dynamo's tracing), three
    more for another input size, two more where eager disagrees with itself (deterministic
    kernels), as docs/usage.md says. The test's outcome stays the plain run's: a passing status,
    and the plain call's output, the last call's."""
    Counted.calls = 0
    x = torch.linspace(-1, 1, 8)
    settings = CheckSettings(intermediates=False, sizes=sizes)
    out = runner.check("test_x.py::test", Counted(reads_count), (x,), {}, settings)
    assert _statuses(runner) == [status]
    assert Counted.calls == calls
    assert torch.equal(out, x * (calls if reads_count else 2))
