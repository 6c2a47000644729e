"""An accuracy finding fails a test only once confirmed: its repro, judged in a fresh process as
``python repro.py`` and the minifier judge it, fails as the check recorded. One that does not
(a deviation in memory no op wrote, a result of this process's state) is reported unconfirmed."""

from __future__ import annotations

import contextlib

from pytest_torchcompile.checking.masked import device_of
from pytest_torchcompile.judging.isolation.parent import IsolatedJudge, IsolationError
from pytest_torchcompile.judging.isolation.protocol import (
    CRASHED,
    JUDGE_ERROR,
    TIMED_OUT,
    JudgeSettings,
)
from pytest_torchcompile.judging.judge import same_failure
from pytest_torchcompile.repros.repro import load_case


class Confirmer:
    """Judges repros in child processes, one kept per Inductor config and device, as the minifier
    keeps one for its candidates: a test that fails many times (hypothesis' shrinking) pays a
    child's start once."""

    def __init__(self) -> None:
        self._judges: dict[tuple[str, str | None], IsolatedJudge | None] = {}
        self._stack = contextlib.ExitStack()

    def close(self) -> None:
        """End the children (from ``pytest_unconfigure``, through the check runner)."""
        self._stack.close()
        self._judges.clear()

    def _judge(self, config_source: str, device: str | None) -> IsolatedJudge | None:
        key = (config_source, device)
        if key not in self._judges:
            try:
                self._judges[key] = self._stack.enter_context(IsolatedJudge(config_source, device=device))
            except (IsolationError, OSError):
                self._judges[key] = None
        return self._judges[key]

    def unconfirmed(self, repro_path: str) -> str | None:
        """Why the repro at ``repro_path``, judged in a child process, does not fail as it
        records; None when it does, or when no verdict could be had there (a child that cannot
        start or crashes says nothing about the finding)."""
        case = load_case(repro_path)
        judge = self._judge(case.config_source, device_of(case.inputs))
        if judge is None:
            return None
        try:
            verdict = judge(case.gm, case.inputs, JudgeSettings(case.tol, case.check_non_float, case.grad_enabled,
                                                                case.level))
        except (IsolationError, OSError):
            return None
        if verdict.failure in (CRASHED, TIMED_OUT, JUDGE_ERROR) \
                or same_failure(verdict, case.kind, case.expected_error, case.error_pattern):
            return None
        fresh = "its repro, judged in a fresh process,"
        if verdict.failure is None:
            return f"{fresh} passes: the compiled graph matches the reference there"
        return f"{fresh} fails another way ({verdict.failure}{f': {verdict.error}' if verdict.error else ''})"
