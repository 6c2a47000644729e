"""An accuracy finding is confirmed when its repro, judged in a fresh process as ``python repro.py``
and the minifier judge it, fails as the check recorded. One that is not still fails its test where
the deviation recurs in the test's process (a compiler patched there, a repro that does not hold the
code the test ran): only a deviation that does not recur is reported unconfirmed."""

from __future__ import annotations

import contextlib
import itertools
from dataclasses import dataclass

from pytest_torchcompile.checking.aside import aside
from pytest_torchcompile.checking.masked import device_of
from pytest_torchcompile.common.kinds import FailureKind
from pytest_torchcompile.common.results import CaseResult
from pytest_torchcompile.common.verdict import Status
from pytest_torchcompile.judging.case import ReproCase
from pytest_torchcompile.judging.isolation.parent import (
    InProcessJudge,
    IsolatedJudge,
    IsolationError,
    SpareChildren,
)
from pytest_torchcompile.judging.isolation.protocol import (
    JudgeSettings,
)
from pytest_torchcompile.judging.judge import same_failure
from pytest_torchcompile.repros.loading import load_case


@dataclass(frozen=True)
class Unreproduced:
    """A repro that, judged in a fresh process, does not fail as its check recorded."""

    reason: str
    """What the fresh process gave, and what differed (:func:`_what_differed`)."""
    fails_here: bool
    """The repro's graph, compiled again in the test's process, fails there as recorded: the
    deviation recurs in that process, whose compiler or state a fresh one lacks."""


def settle(result: CaseResult, unreproduced: Unreproduced, recurs: bool) -> None:
    """A failing check's status once its repro is not confirmed: still failing, the reason in its
    message, where the deviation recurs in this process (``recurs``: the check's compiled code,
    run again on the same inputs, failed again; or the repro's graph fails here); else
    ``unconfirmed``. Where only the test's own code fails again, the repro misses what the test
    ran: a defect of the repro, said so."""
    if not (recurs or unreproduced.fails_here):
        result.status, result.unconfirmed = Status.UNCONFIRMED, unreproduced.reason
        return
    defect = "" if unreproduced.fails_here else " (a defect of the repro)"
    result.message += f"; the deviation recurs in this process, but {unreproduced.reason}{defect}"


class Confirmer:
    """Judges repros in child processes, one kept per Inductor config and device, as the minifier
    keeps one for its candidates: a test that fails many times (hypothesis' shrinking) pays a
    child's start once."""

    def __init__(self) -> None:
        self._judges: dict[tuple[str, str | None], IsolatedJudge | None] = {}
        self._stack = contextlib.ExitStack()
        self._prestarted = SpareChildren()
        self._stack.callback(self._prestarted.close)
        self.devices: dict[str, str | None] = {}
        """By repro path, the device each repro was judged on (None: the CPU)."""

    def prestart(self, config_source: str, device: str | None) -> None:
        """Start the child that will confirm a finding of this config and device, where none
        runs yet: a check calls this as its outputs deviate, so that the child's start (Python,
        torch, Inductor) overlaps the rest of the check and the writing of its repro. A child
        that no finding adopts is ended with the others."""
        if (config_source, device) not in self._judges:
            # One that cannot start now is started again, or not at all, when a finding needs it.
            with contextlib.suppress(IsolationError, OSError):
                self._prestarted.prestart(config_source, device)

    def start(self, device: str | None) -> None:
        """Start a child for the findings of checks on ``device`` before any is found, where
        none runs or waits for one yet (a check calls this as it begins): its start (Python,
        torch, Inductor) then overlaps the check, and a confirmation costs the repro's compile
        in a warm process. It waits, holding its torch, until a finding adopts it or the run
        ends."""
        if all(known != device for _, known in self._judges):
            with contextlib.suppress(IsolationError, OSError):
                self._prestarted.prestart_unset(device)

    def close(self) -> None:
        """End the children (from ``pytest_unconfigure``, through the check runner)."""
        self._stack.close()
        self._judges.clear()

    def hand_over(self, config_source: str, device: str | None, spares: SpareChildren) -> bool:
        """Give the started child that confirmed cases of this config and device to ``spares``
        (see :meth:`IsolatedJudge.hand_over`): the minify phase judges the same case's candidates
        there, so a failing run starts one child, not two. False where there is none to give."""
        judge = self._judges.get((config_source, device))
        return judge is not None and judge.hand_over(spares)

    def _judge(self, config_source: str, device: str | None) -> IsolatedJudge | None:
        key = (config_source, device)
        if key not in self._judges:
            try:
                self._judges[key] = self._stack.enter_context(
                    IsolatedJudge(config_source, device=device, spares=self._prestarted)
                )
            except (IsolationError, OSError):
                self._judges[key] = None
        return self._judges[key]

    def unreproduced(self, repro_path: str) -> Unreproduced | None:
        """How the repro at ``repro_path``, judged in a child process, does not fail as it
        records; None when it does, or when no verdict could be had there (a child that cannot
        start or crashes says nothing about the finding)."""
        case = load_case(repro_path)
        device = self.devices[repro_path] = device_of(case.inputs)
        judge = self._judge(case.config_source, device)
        if judge is None:
            return None
        settings = JudgeSettings(case.tol, case.check_non_float, case.grad_enabled, case.level)
        try:
            verdict = judge(case.gm, case.inputs, settings)
        except (IsolationError, OSError):
            return None
        if verdict.failure in (
            FailureKind.CRASHED,
            FailureKind.TIMED_OUT,
            FailureKind.JUDGE_ERROR,
        ) or same_failure(verdict, case.kind, case.expected_error, case.error_pattern):
            return None
        fresh = "its repro, judged in a fresh process,"
        if verdict.failure is None:
            outcome = f"{fresh} passes: the compiled graph matches the reference there"
        else:
            outcome = f"{fresh} fails another way ({verdict.failure}{f': {verdict.error}' if verdict.error else ''})"
        differed, fails_here = _what_differed(case, settings, judge)
        return Unreproduced(f"{outcome}; {differed}", fails_here)


def _what_differed(
    case: ReproCase, settings: JudgeSettings, there: IsolatedJudge
) -> tuple[str, bool]:
    """Why a repro judged in a fresh process does not fail as this process recorded: the same
    graph judged here again and, where it fails here, the code Inductor generates for it here and
    there; and whether it fails here (:attr:`Unreproduced.fails_here`)."""
    try:
        # Not a compile of the test's: no check watching this test may judge it.
        with aside(), InProcessJudge(case.config_source) as here:
            verdict = here(case.gm, case.inputs, settings)
            if not same_failure(verdict, case.kind, case.expected_error, case.error_pattern):
                return (
                    "judged again in this process, the repro's graph passes too: the failure was in the "
                    "code the test ran, which the graph the repro holds does not compile to",
                    False,
                )
            here_code = here.kernel_source(case.gm, case.inputs, settings)
        there_code = there.kernel_source(case.gm, case.inputs, settings)
    except (IsolationError, OSError) as error:
        return f"what differed is unknown ({type(error).__name__}: {error})", False
    if here_code is None or there_code is None:
        return (
            "the repro's graph fails again in this process; the code it compiles to could not be compared",
            True,
        )
    if here_code == there_code:
        return (
            "the repro's graph fails again in this process, and compiles to the same code in both: what "
            "differs is this process's state as the code runs",
            True,
        )
    line, here_line, there_line = _first_difference(here_code.splitlines(), there_code.splitlines())
    return (
        f"the repro's graph fails again in this process, where Inductor generates other code for it than "
        f"in the fresh process (line {line}: here {here_line!r}, there {there_line!r}): this process "
        "compiles with something a fresh one lacks (a patched lowering, decomposition or pass)",
        True,
    )


def _first_difference(here: list[str], there: list[str], width: int = 100) -> tuple[int, str, str]:
    """The first line (1-based) where two texts differ, and that line of each (shortened)."""
    for number, (mine, theirs) in enumerate(
        itertools.zip_longest(here, there, fillvalue=""), start=1
    ):
        if mine != theirs:
            return number, mine.strip()[:width], theirs.strip()[:width]
    return len(here) + 1, "", ""
