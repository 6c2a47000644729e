"""Minify one repro file: its case loaded, reduced (``search``) by a judging process, and the
minimal graph written beside it as ``minified.py`` (compact where it can be), with the kernel
Inductor generated for it and ``bug_report.md``; or, where the repro cannot be read, the disk
refuses the files or the judging process dies, a result that says so.
"""

from __future__ import annotations

import functools
import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from pytest_torchcompile.common.files import (
    BUG_REPORT_NAME,
    KERNEL_NAME,
    MINIFIED_NAME,
    atomic_write,
    locked,
)
from pytest_torchcompile.common.kinds import FailureKind
from pytest_torchcompile.common.leaves import shown_table
from pytest_torchcompile.common.results import (
    MinifyProgress,
    MinifyResult,
    StopReason,
)
from pytest_torchcompile.judging.case import ReproCase
from pytest_torchcompile.judging.isolation.parent import (
    InProcessJudge,
    IsolatedJudge,
    IsolationError,
    SpareChildren,
)
from pytest_torchcompile.judging.isolation.protocol import (
    JudgeSettings,
    StageQuery,
)
from pytest_torchcompile.judging.judge import (
    DYNAMO,
    GraphVerdict,
    ReproBroken,
)
from pytest_torchcompile.judging.stages import ExpectedFailure, StageAttribution, graph_ops
from pytest_torchcompile.minifying.search import Reduction, minify_graph
from pytest_torchcompile.repros.bug_report import bug_report
from pytest_torchcompile.repros.loading import load_case
from pytest_torchcompile.repros.reading import config_lines
from pytest_torchcompile.repros.repro import write_minified
from pytest_torchcompile.torch_internals.compiling import cpp_kernels

ATTRIBUTABLE = (FailureKind.ACCURACY, FailureKind.COMPILE_ERROR, FailureKind.RUNTIME_ERROR)
"""Failures whose stage is looked for: a case recorded as a crash of the judging process would
crash it again at every stage."""

FRESH_PROCESS_GRACE_S = 120.0
"""Beyond its time budget, how long a minifying process may take to start and write its files."""


def minify_repro(
    repro_path: Path,
    *,
    timeout_s: float = 300.0,
    progress: Callable[[MinifyProgress], None] | None = None,
    isolate: bool = True,
    device: str | None = None,
    find_stage: bool = True,
    spares: SpareChildren | None = None,
) -> MinifyResult:
    """Minify the case of a repro file; write ``minified.py`` and the generated kernel beside it.

    Candidates are judged in a warm child process (``isolate``) on ``device`` ("cuda:N"), so that
    a crashing or hanging candidate cannot take this process down. ``repro.py`` is only read,
    and every file written is replaced atomically: nothing is lost if the minifier dies. With
    ``find_stage``, the stage of the stack that introduces the failure is looked for too (see
    ``stages``), in the same child, which may be one prestarted in ``spares``.
    """
    started = time.perf_counter()
    path = Path(repro_path).resolve()
    try:
        config_source = config_lines(path)
    except ReproBroken as error:
        return _broken(error, started)
    judging = (
        IsolatedJudge(config_source, device=device, candidate_timeout_s=timeout_s, spares=spares)
        if isolate
        else InProcessJudge(config_source)
    )
    with judging as judge:
        try:
            case = load_case(path)
        except ReproBroken as error:
            return _broken(error, started)
        try:
            found = _search(case, judge, started, timeout_s, progress, find_stage)
        except IsolationError as error:
            return _crashed(case, error, started, list(judge.deaths))
    if found.reduction.gm is None:
        return _unreduced(found.reduction, found.seconds, list(judge.deaths))
    return _written(path, case, found, list(judge.deaths), started)


@dataclass
class _Found:
    """What the judging process made of a case: the reduction, the code Inductor generated for
    its graph, the stage that introduces the failure (where looked for), and when it was done."""

    reduction: Reduction
    kernel: str | None
    seconds: float
    stage: StageAttribution | None
    failure_type: str


def _search(
    case: ReproCase,
    judge: InProcessJudge | IsolatedJudge,
    started: float,
    timeout_s: float,
    progress: Callable[[MinifyProgress], None] | None,
    find_stage: bool,
) -> _Found:
    """The reduction of ``case`` within what is left of ``timeout_s``, its generated code and,
    with ``find_stage``, its stage, all judged by ``judge``."""
    query = stage_query(case)
    settings = query.settings
    reduction = minify_graph(
        case,
        functools.partial(judge, settings=settings),
        budget_s=timeout_s - (time.perf_counter() - started),
        progress=progress,
    )
    kernel = (
        judge.kernel_source(reduction.gm, reduction.inputs, settings)
        if reduction.gm is not None
        else None
    )
    seconds = time.perf_counter() - started
    stage = (
        judge.attribute_stage(reduction.gm, reduction.inputs, query)
        if reduction.gm is not None and find_stage and case.kind in ATTRIBUTABLE
        else None
    )
    return _Found(reduction, kernel, seconds, stage, query.failure.type_name)


def _crashed(
    case: ReproCase, error: IsolationError, started: float, deaths: list[str]
) -> MinifyResult:
    """The result where the judging process died past what it survives: nothing was reduced."""
    return MinifyResult(
        case.op_count,
        case.op_count,
        time.perf_counter() - started,
        0,
        StopReason.CRASHED,
        note=str(error),
        judge_deaths=deaths,
    )


def _unreduced(reduction: Reduction, seconds: float, deaths: list[str]) -> MinifyResult:
    """The result where no failing graph was found: nothing is written."""
    return MinifyResult(
        reduction.ops_before,
        reduction.ops_after,
        seconds,
        reduction.compiles,
        reduction.stop,
        note=reduction.how,
        judge_deaths=deaths,
        deviation=reduction.deviation,
        trajectory=reduction.trajectory,
    )


def _written(
    path: Path, case: ReproCase, found: _Found, deaths: list[str], started: float
) -> MinifyResult:
    """Write ``minified.py``, the kernel and ``bug_report.md`` beside the repro at ``path``; the
    result says where, or why the disk refused them."""
    reduction, seconds = found.reduction, found.seconds
    assert reduction.gm is not None
    compiles = reduction.compiles + 1  # the kernel's
    note = _note(reduction, compiles, seconds)
    # A torch-level graph's comment shows the post-AOT graphs it lowers to, not a kernel file.
    if case.level == DYNAMO:
        generated, comment = None, found.kernel or ""
    else:
        generated = _generated_code(found.kernel)
        comment = generated[0] if generated else ""
    ops = graph_ops(reduction.gm)
    report_path = path.with_name(BUG_REPORT_NAME)
    try:
        # Only into the case directory itself: a symbolic link there (at tensors/) is not followed.
        minified = write_minified(
            _minified_case(case, reduction, note, comment, found.stage),
            path.with_name(MINIFIED_NAME),
            within=path.parent,
        )
        kernel_path = _write_kernel(generated, path.parent)
        with locked(path.parent):
            atomic_write(
                report_path,
                bug_report(path, _outcome(reduction.verdict), ops).encode(),
                within=path.parent,
            )
    except OSError as error:
        # The directory turned read-only or full since the repro was written: the minifier did
        # its work, the disk refused it.
        return MinifyResult(
            reduction.ops_before,
            reduction.ops_after,
            seconds,
            compiles,
            StopReason.UNWRITTEN,
            note=f"{error.strerror or error} in {path.parent}; unminified repro kept: {path}",
            ops=ops,
            judge_deaths=deaths,
        )
    result = MinifyResult(
        reduction.ops_before,
        reduction.ops_after,
        seconds,
        compiles,
        reduction.stop,
        str(minified),
        str(kernel_path) if kernel_path else None,
        note,
        ops,
        failure_type=found.failure_type,
        judge_deaths=deaths,
        bug_report_path=str(report_path),
        deviation=reduction.deviation,
        trajectory=reduction.trajectory,
    )
    if found.stage is not None:
        result.stage, result.stage_summary = found.stage.stage, found.stage.summary
        result.stage_compiles, result.stage_seconds = (
            found.stage.compiles,
            time.perf_counter() - started - seconds,
        )
    return result


def stage_query(case: ReproCase) -> StageQuery:
    """How the stage of a case's failure is looked for: judged as its candidates are."""
    return StageQuery(
        JudgeSettings.for_minifying(case),
        ExpectedFailure(case.kind, case.expected_error, case.error_pattern),
    )


def minify_in_fresh_process(
    repro_path: Path,
    *,
    timeout_s: float = 300.0,
    progress: Callable[[MinifyProgress], None] | None = None,
    isolate: bool = True,
    device: str | None = None,
) -> MinifyResult:
    """:func:`minify_repro` run by ``python -m pytest_torchcompile`` in a new process, for a
    process whose device a device-side error has made unusable: the reducer itself runs the
    graph eagerly to feed its candidates. ``progress`` is not reported across processes."""
    with tempfile.TemporaryDirectory(prefix="pytest-torchcompile-") as scratch:
        result_path = Path(scratch) / "result.json"
        command = [
            sys.executable,
            "-m",
            "pytest_torchcompile",
            "minify",
            str(repro_path),
            "--timeout",
            str(timeout_s),
            "--result-json",
            str(result_path),
        ]
        command += [] if isolate else ["--no-isolate"]
        command += ["--device", device] if device is not None else []
        run = subprocess.run(
            command, capture_output=True, text=True, timeout=timeout_s + FRESH_PROCESS_GRACE_S
        )
        if not result_path.is_file():
            tail = (run.stdout + run.stderr).strip().splitlines()[-3:]
            raise RuntimeError(f"the minifying process exited {run.returncode}: {' | '.join(tail)}")
        return MinifyResult(**json.loads(result_path.read_text()))


def _broken(error: ReproBroken, started: float) -> MinifyResult:
    """The result for a repro file that cannot be read or loaded: nothing was judged."""
    return MinifyResult(
        0, 0, time.perf_counter() - started, 0, StopReason.REPRO_BROKEN, note=str(error)
    )


def _note(reduction: Reduction, compiles: int, seconds: float) -> str:
    summary = f"{reduction.ops_before} -> {reduction.ops_after} ops in {seconds:.1f} s, {compiles} compiles"
    if reduction.stop is not StopReason.MINIMAL:
        return f"NOT MINIMAL: {reduction.how}; the smallest failing graph found so far ({summary})"
    return (
        f"minified by pytest-torchcompile ({summary}): {reduction.how}; "
        "1-minimal: without any one of its ops it no longer fails"
        + (f"; {reduction.needs}" if reduction.needs else "")
    )


def _outcome(verdict: GraphVerdict | None) -> str:
    """What the minimal graph gave, for its bug report: the per-output table, or the error."""
    if verdict is None:
        return ""
    if verdict.leaves:
        return shown_table(verdict.leaves)
    return verdict.error or ""


def _minified_case(
    case: ReproCase,
    reduction: Reduction,
    note: str,
    generated_code: str,
    stage: StageAttribution | None,
) -> ReproCase:
    assert reduction.gm is not None
    label = "" if reduction.stop is StopReason.MINIMAL else f", {reduction.stop.label}"
    return replace(
        case,
        gm=reduction.gm,
        inputs=reduction.inputs,
        check_non_float=JudgeSettings.for_minifying(case).check_non_float,
        symbolic_sizes=[],
        notes=[*case.notes, note],
        generated_code=generated_code,
        stage=stage.summary if stage is not None else "",
        status_line=f"{case.status_line or case.kind} (minified {reduction.ops_before} -> {reduction.ops_after} ops{label})",
    )


def _generated_code(source: str | None) -> tuple[str, str] | None:
    """The code Inductor generated for the minified graph and its file suffix: the C++ kernels on
    a CPU; on a GPU the whole module, whose Triton kernels are Python."""
    if source is None:
        return None
    cpp = cpp_kernels(source)
    return (cpp, ".cpp") if cpp else (source, ".py")


def _write_kernel(generated: tuple[str, str] | None, directory: Path) -> Path | None:
    if generated is None:
        return None
    code, suffix = generated
    path = directory / f"{KERNEL_NAME}{suffix}"
    with locked(directory):
        atomic_write(path, code.encode(), within=directory)
    return path
