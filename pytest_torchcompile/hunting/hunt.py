"""The hunt: draw programs (``drawing.programs``) for a time budget, check each as the fixture
does, and reduce what fails to its distinct root causes (``causes``).

Each program is checked by the plugin's own check (``CheckRunner.check``: eager twice, the fp64
reference, the compiled run, the masked-deviation probe), its failing graph written as a repro
and an accuracy failure confirmed in a fresh process. Confirmed failures are then minified
(``minify_repro``: the 1-minimal graph, its stage, ``bug_report.md``) and grouped by the
signature runs group by (``reporting.grouping``). A failure whose graph holds every op of a cause
already minified, with its failure type, is counted against that cause without a minification of
its own; a cause whose minimal ops and failure type match a known case (``minified.py`` of a
repro directory given as known) is reported as known.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import torch
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import seed as hypothesis_seed
from hypothesis.strategies import SearchStrategy

from pytest_torchcompile.checking.runner import CheckRunner
from pytest_torchcompile.common.results import CaseResult
from pytest_torchcompile.common.settings import CheckSettings
from pytest_torchcompile.common.verdict import Status
from pytest_torchcompile.hunting.causes import (
    PROGRAM_NAME,
    HuntCause,
    known_cases,
    reduce_findings,
)
from pytest_torchcompile.hunting.drawing import programs
from pytest_torchcompile.hunting.program import ALL_DTYPES, Program
from pytest_torchcompile.reporting.layout import TerminalLayout
from pytest_torchcompile.run.session import AccuracySession

DTYPES_BY_NAME = {str(dtype).removeprefix("torch."): dtype for dtype in ALL_DTYPES}
"""The dtypes a hunt's inputs may be narrowed to, by the names the command line takes."""


class _BudgetSpent(BaseException):
    """Ends the drawing when the budget is spent (a BaseException: hypothesis does not shrink it)."""


@dataclass
class HuntResult:
    seconds: float
    programs: int
    findings: int
    """Programs whose check failed, confirmed (a fresh process judges alike)."""
    unconfirmed: int
    invalid: list[str]
    """Programs eager could not run (a defect of the generator): their errors."""
    causes: list[HuntCause]
    unreduced: list[str]
    """Findings that could not be minified and attributed: their repros."""
    unreferenced: list[str] = field(default_factory=list)
    """Accuracy failures judged without an fp64 reference, not counted as findings: their repros."""

    @property
    def per_minute(self) -> float:
        return self.programs / max(self.seconds / 60, 1e-9)

    def lines(self) -> list[str]:
        new = [cause for cause in self.causes if cause.known is None]
        lines = [
            f"hunt: {self.programs} programs in {self.seconds / 60:.1f} min "
            f"({self.per_minute:.1f} per minute)",
            f"findings: {self.findings} confirmed, {self.unconfirmed} unconfirmed; "
            f"distinct causes: {len(self.causes)} ({len(new)} not known)",
        ]
        if self.unreferenced:
            lines.append(f"not counted, judged without fp64: {len(self.unreferenced)}")
        if self.invalid:
            lines.append(
                f"programs eager could not run: {len(self.invalid)} (first: {self.invalid[0][:40]})"
            )
        for cause in self.causes:
            lines += _cause_lines(cause)
        lines += [f"not reduced: {_shown(path)}" for path in self.unreduced]
        return lines


def _cause_lines(cause: HuntCause) -> list[str]:
    known = f" (known: {cause.known})" if cause.known else ""
    files = (
        ("minified", cause.minified),
        ("bug report", cause.bug_report),
        ("program", cause.program),
    )
    return [
        f"[{len(cause.programs)} programs] {cause.failure_type}: {', '.join(cause.ops)}{known}",
        *(f"  {label}: {_shown(path)}" for label, path in files if path),
    ]


def _shown(path: str) -> str:
    """A path relative to the working directory where it lies under it."""
    relative = os.path.relpath(path)
    return path if relative.startswith("..") else relative


@dataclass
class _Drawn:
    checked: list[tuple[str, Program]] = field(default_factory=list)
    invalid: list[str] = field(default_factory=list)


def _draw_and_check(
    runner: CheckRunner,
    session: AccuracySession,
    deadline: float,
    seed: int,
    drawing: SearchStrategy[Program],
    drawn: _Drawn,
) -> None:
    @settings(
        max_examples=10**9,
        deadline=None,
        database=None,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @hypothesis_seed(seed)
    @given(drawing)
    def check(program: Program) -> None:
        if time.monotonic() > deadline:
            raise _BudgetSpent
        nodeid = f"program_{len(drawn.checked)}"
        drawn.checked.append((nodeid, program))
        try:
            runner.check(
                nodeid,
                program.fn,
                program.make_inputs(),
                {},
                session.base_settings.replace(program.options),
            )
        except pytest.fail.Exception:
            pass
        except Exception as error:  # a program eager cannot run: counted, the hunt goes on
            drawn.invalid.append(f"{nodeid}: {type(error).__name__}: {error}")
        finally:
            runner.compiled_cache.clear()

    with contextlib.suppress(_BudgetSpent):
        check()


def _check_programs(
    session: AccuracySession, deadline: float, seed: int, drawing: SearchStrategy[Program]
) -> _Drawn:
    """Check the programs ``drawing`` draws until ``deadline``, as the fixture checks a model."""
    # Repro headers name paths under the working directory relative to it, as a run's name them
    # relative to its rootdir.
    runner = CheckRunner.start(
        session, TerminalLayout(root=Path.cwd()), trace_log=False, probe_child=False
    )
    drawn = _Drawn()
    try:
        _draw_and_check(runner, session, deadline, seed, drawing, drawn)
    finally:
        runner.close()
    return drawn


def _keep_programs(failing: list[CaseResult], drawn: _Drawn) -> None:
    """Write each failing program beside its repro, as a script."""
    programs_by_id = dict(drawn.checked)
    for result in failing:
        if result.repro_path:
            Path(result.repro_path).with_name(PROGRAM_NAME).write_text(
                programs_by_id[result.nodeid].script()
            )


def _unreferenced(failing: list[CaseResult]) -> list[CaseResult]:
    """Accuracy failures judged without the fp64 reference (the cosine check against eager): not
    counted, as an ill-conditioned program fails it where the compiled result is the closer."""
    return [
        result
        for result in failing
        if result.status is Status.FAIL_ACCURACY and result.reference != "fp64"
    ]


def _findings(failing: list[CaseResult], unreferenced: list[CaseResult]) -> list[CaseResult]:
    """The failures the hunt counts: a sound repro written, judged against fp64."""
    return [
        result
        for result in failing
        if result.repro_path and result.repro_defect is None and result not in unreferenced
    ]


def hunt(
    minutes: float,
    directory: Path,
    seed: int = 0,
    minify_timeout: float = 120.0,
    max_ops: int = 6,
    known: Sequence[Path] = (),
    intermediates: bool = False,
    inductor_config: dict[str, Any] | None = None,
    progress: Callable[[str], None] = print,
    dtypes: Sequence[torch.dtype] = ALL_DTYPES,
    specials: bool | None = None,
) -> HuntResult:
    """Hunt for ``minutes``, writing every finding under ``directory``; then reduce. The
    masked-deviation probe (``intermediates``) is off unless asked for: it compiles every
    program twice, halving the programs checked. ``dtypes`` and ``specials`` narrow the programs
    drawn (:func:`drawing.programs`): the dtypes of their inputs, and whether their floating
    inputs hold NaNs, infinities, negative zeros and subnormals."""
    started = time.monotonic()
    base = CheckSettings(
        minify_timeout=minify_timeout,
        intermediates=intermediates,
        inductor_config=dict(inductor_config or {}),
    )
    session = AccuracySession(True, directory, base, dict)
    drawing = programs(max_ops=max_ops, dtypes=dtypes, specials=specials)
    drawn = _check_programs(session, started + minutes * 60, seed, drawing)
    seconds = time.monotonic() - started
    failing = [result for result in session.results if result.status.is_compiler_failure]
    _keep_programs(failing, drawn)
    unreferenced = _unreferenced(failing)
    findings = _findings(failing, unreferenced)
    causes, unreduced = reduce_findings(
        findings, known_cases(known, progress), minify_timeout, progress
    )
    unconfirmed = sum(1 for result in session.results if result.status is Status.UNCONFIRMED)
    return HuntResult(
        seconds,
        len(drawn.checked),
        len(findings),
        unconfirmed,
        drawn.invalid,
        causes,
        unreduced,
        [result.repro_path or result.nodeid for result in unreferenced],
    )


def hunt_options(args: Any) -> dict[str, Any]:
    """The keywords of :func:`hunt` from the command line's arguments."""
    return {
        "minutes": args.minutes,
        "directory": args.dir,
        "seed": args.seed,
        "minify_timeout": args.minify_timeout,
        "max_ops": args.max_ops,
        "known": args.known,
        "intermediates": args.intermediates,
        "inductor_config": dict(args.inductor_config),
        "dtypes": [DTYPES_BY_NAME[name] for name in args.dtypes] if args.dtypes else ALL_DTYPES,
        "specials": {"always": True, "never": False, "drawn": None}[args.specials],
    }
