"""The hunt: draw programs (``programs.programs``) for a time budget, check each as the fixture
does, and reduce what fails to its distinct root causes.

Each program is checked by the plugin's own check (``CheckRunner.check``: eager twice, the fp64
reference, the compiled run, the masked-deviation probe), its failing graph written as a repro
and an accuracy failure confirmed in a fresh process. Confirmed failures are then minified
(``minify_repro``: the 1-minimal graph, its stage, ``bug_report.md``) and grouped by the
signature runs group by (``run.grouping``). A failure whose graph holds every op of a cause
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
from pytest_torchcompile.common.files import MINIFIED_NAME
from pytest_torchcompile.common.kinds import FailureKind
from pytest_torchcompile.common.results import CaseResult
from pytest_torchcompile.common.settings import CheckSettings
from pytest_torchcompile.common.verdict import Status
from pytest_torchcompile.judging.judge import ReproBroken
from pytest_torchcompile.minifying.repro_file import minify_repro
from pytest_torchcompile.programs import ALL_DTYPES, Program, programs
from pytest_torchcompile.reporting.grouping import root_causes
from pytest_torchcompile.reporting.layout import TerminalLayout
from pytest_torchcompile.repros.reading import (
    NotARepro,
    file_graph_ops,
    file_recorded_kind,
    header_fields,
)
from pytest_torchcompile.run.session import AccuracySession

DTYPES_BY_NAME = {str(dtype).removeprefix("torch."): dtype for dtype in ALL_DTYPES}
"""The dtypes a hunt's inputs may be narrowed to, by the names the command line takes."""

PROGRAM_NAME = "program.py"
"""Beside each finding's repro: the drawn program that failed, as a script."""


class _BudgetSpent(BaseException):
    """Ends the drawing when the budget is spent (a BaseException: hypothesis does not shrink it)."""


@dataclass
class Cause:
    """One root cause: its signature, the programs that showed it, its files."""

    signature: str
    failure_type: str
    ops: list[str]
    programs: list[str] = field(default_factory=list)
    minified: str | None = None
    bug_report: str | None = None
    program: str | None = None
    known: str | None = None
    """The known case it matches, if any."""


@dataclass
class HuntResult:
    seconds: float
    programs: int
    findings: int
    """Programs whose check failed, confirmed (a fresh process judges alike)."""
    unconfirmed: int
    invalid: list[str]
    """Programs eager could not run (a defect of the generator): their errors."""
    causes: list[Cause]
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
            known = f" (known: {cause.known})" if cause.known else ""
            lines.append(
                f"[{len(cause.programs)} programs] {cause.failure_type}: {', '.join(cause.ops)}{known}"
            )
            for label, path in (
                ("minified", cause.minified),
                ("bug report", cause.bug_report),
                ("program", cause.program),
            ):
                if path:
                    lines.append(f"  {label}: {_shown(path)}")
        lines += [f"not reduced: {_shown(path)}" for path in self.unreduced]
        return lines


def _shown(path: str) -> str:
    """A path relative to the working directory where it lies under it."""
    relative = os.path.relpath(path)
    return path if relative.startswith("..") else relative


def _case_ops(path: Path) -> tuple[str, list[str]] | None:
    """The failure kind and the ops of a repro file's graph, read from its text: a known case
    may be anyone's file, and reading it runs none of its code. None where it states neither."""
    kind = file_recorded_kind(path)
    if kind not in set(FailureKind):
        return None
    try:
        return FailureKind(kind), file_graph_ops(path)
    except ReproBroken:
        return None


def known_cases(
    directories: Sequence[Path], progress: Callable[[str], None]
) -> dict[tuple[str, tuple[str, ...]], str]:
    """The minimal graphs of known cases (each ``minified.py`` under ``directories``), by failure
    kind and op set. A file whose header is no repro's (a pipe, a planted file) is said to
    ``progress`` and read no further."""
    known: dict[tuple[str, tuple[str, ...]], str] = {}
    for directory in directories:
        for minified in sorted(directory.glob(f"*/{MINIFIED_NAME}")):
            try:
                header_fields(minified)
            except NotARepro as error:
                progress(f"--known: not a repro ({error}): {minified}")
                continue
            found = _case_ops(minified)
            if found is not None:
                known[(found[0], tuple(sorted(found[1])))] = minified.parent.name
    return known


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
    drawn (:func:`programs.programs`): the dtypes of their inputs, and whether their floating
    inputs hold NaNs, infinities, negative zeros and subnormals."""
    started = time.monotonic()
    base = CheckSettings(
        minify_timeout=minify_timeout,
        intermediates=intermediates,
        inductor_config=dict(inductor_config or {}),
    )
    session = AccuracySession(True, directory, base, dict)
    # Repro headers name paths under the working directory relative to it, as a run's name them
    # relative to its rootdir.
    runner = CheckRunner.start(
        session, TerminalLayout(root=Path.cwd()), trace_log=False, probe_child=False
    )
    drawn = _Drawn()
    try:
        drawing = programs(max_ops=max_ops, dtypes=dtypes, specials=specials)
        _draw_and_check(runner, session, started + minutes * 60, seed, drawing, drawn)
    finally:
        runner.close()
    seconds = time.monotonic() - started
    programs_by_id = dict(drawn.checked)
    failing = [result for result in session.results if result.status.is_compiler_failure]
    for result in failing:
        if result.repro_path:
            Path(result.repro_path).with_name(PROGRAM_NAME).write_text(
                programs_by_id[result.nodeid].script()
            )
    # An accuracy failure judged without the fp64 reference (the cosine check against eager) is
    # not counted: an ill-conditioned program fails it where the compiled result is the closer.
    unreferenced = [
        result
        for result in failing
        if result.status is Status.FAIL_ACCURACY and result.reference != "fp64"
    ]
    findings = [
        result
        for result in failing
        if result.repro_path and result.repro_defect is None and result not in unreferenced
    ]
    causes, unreduced = _reduce(findings, known_cases(known, progress), minify_timeout, progress)
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


def _reduce(
    findings: list[CaseResult],
    known: dict[tuple[str, tuple[str, ...]], str],
    minify_timeout: float,
    progress: Callable[[str], None],
) -> tuple[list[Cause], list[str]]:
    causes: dict[str, Cause] = {}
    unreduced: list[str] = []
    for result in findings:
        path = Path(result.repro_path or "")
        found = _case_ops(path)
        if found is None:
            unreduced.append(str(path))
            continue
        kind, ops = found
        covered = next(
            (
                cause
                for cause in causes.values()
                if cause.failure_type == kind and set(cause.ops) <= set(ops)
            ),
            None,
        )
        if covered is not None:
            covered.programs.append(result.nodeid)
            continue
        progress(f"minifying {path.parent.name} ({len(ops)} distinct ops)")
        result.minify = minify_repro(path, timeout_s=minify_timeout)
        signature = result.minify.signature
        if signature is None or result.minify.path is None:
            unreduced.append(str(path))
            continue
        cause = causes.get(signature)
        if cause is None:
            minimal = _case_ops(Path(result.minify.path))
            kind_ops = (kind, tuple(sorted(minimal[1] if minimal else result.minify.ops)))
            cause = causes[signature] = Cause(
                signature,
                kind,
                list(minimal[1] if minimal else result.minify.ops),
                minified=result.minify.path,
                bug_report=result.minify.bug_report_path,
                program=str(path.with_name(PROGRAM_NAME)),
                known=known.get(kind_ops),
            )
        cause.programs.append(result.nodeid)
    # The order run summaries use: the causes breaking most programs first.
    order = [
        group.signature for group in root_causes([r for r in findings if r.minify is not None])
    ]
    ranked = sorted(
        causes.values(),
        key=lambda cause: (
            -len(cause.programs),
            order.index(cause.signature) if cause.signature in order else 0,
        ),
    )
    return ranked, unreduced


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
