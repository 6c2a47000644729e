"""The hunt's root causes: its confirmed findings minified and grouped by signature (the one runs
group by, ``reporting/grouping.py``), a finding whose graph holds a cause's ops counted against
it without a minification of its own, and each cause matched against known cases."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from pytest_torchcompile.common.files import MINIFIED_NAME
from pytest_torchcompile.common.kinds import FailureKind
from pytest_torchcompile.common.results import CaseResult, MinifyResult
from pytest_torchcompile.judging.judge import ReproBroken
from pytest_torchcompile.minifying.repro_file import minify_repro
from pytest_torchcompile.reporting.grouping import root_causes
from pytest_torchcompile.repros.reading import (
    NotARepro,
    file_graph_ops,
    file_recorded_kind,
    header_fields,
)

PROGRAM_NAME = "program.py"
"""Beside each finding's repro: the drawn program that failed, as a script."""

KnownCases = dict[tuple[str, tuple[str, ...]], str]
"""Known cases' directory names, by failure kind and sorted op set."""


@dataclass
class HuntCause:
    """A root cause as the hunt reports it. Unlike a run's ``RootCause``, which groups checks
    by signature alone, it counts every drawn program whose graph holds its ops with its failure
    type, keeps the files of the one finding minified for it, and names the known case it
    matches."""

    signature: str
    failure_type: str
    ops: list[str]
    programs: list[str] = field(default_factory=list)
    minified: str | None = None
    bug_report: str | None = None
    program: str | None = None
    known: str | None = None
    """The known case it matches, if any."""


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


def known_cases(directories: Sequence[Path], progress: Callable[[str], None]) -> KnownCases:
    """The minimal graphs of known cases (each ``minified.py`` under ``directories``), by failure
    kind and op set. A file whose header is no repro's (a pipe, a planted file) is said to
    ``progress`` and read no further."""
    known: KnownCases = {}
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


def _covering(causes: Iterable[HuntCause], kind: str, ops: list[str]) -> HuntCause | None:
    """The first cause of failure kind ``kind`` whose ops are all among ``ops``."""
    return next(
        (cause for cause in causes if cause.failure_type == kind and set(cause.ops) <= set(ops)),
        None,
    )


def _cause(minify: MinifyResult, kind: str, repro: Path, known: KnownCases) -> HuntCause:
    """The cause a finding's minification found: the ops of its minimal graph as the minified
    file states them (the minification's own where it states none)."""
    assert minify.signature is not None and minify.path is not None
    minimal = _case_ops(Path(minify.path))
    ops = list(minimal[1] if minimal else minify.ops)
    return HuntCause(
        minify.signature,
        kind,
        ops,
        minified=minify.path,
        bug_report=minify.bug_report_path,
        program=str(repro.with_name(PROGRAM_NAME)),
        known=known.get((kind, tuple(sorted(ops)))),
    )


@dataclass
class _Reduction:
    known: KnownCases
    minify_timeout: float
    progress: Callable[[str], None]
    causes: dict[str, HuntCause] = field(default_factory=dict)
    """By signature."""

    def count(self, finding: CaseResult) -> bool:
        """Count ``finding`` against its cause, minifying it where no cause found so far covers
        it; False where it could not be minified and attributed."""
        repro = Path(finding.repro_path or "")
        found = _case_ops(repro)
        if found is None:
            return False
        kind, ops = found
        cause = _covering(self.causes.values(), kind, ops)
        if cause is None:
            self.progress(f"minifying {repro.parent.name} ({len(ops)} distinct ops)")
            finding.minify = minify_repro(repro, timeout_s=self.minify_timeout)
            signature = finding.minify.signature
            if signature is None or finding.minify.path is None:
                return False
            if signature not in self.causes:
                self.causes[signature] = _cause(finding.minify, kind, repro, self.known)
            cause = self.causes[signature]
        cause.programs.append(finding.nodeid)
        return True

    def ranked(self, findings: list[CaseResult]) -> list[HuntCause]:
        """The causes breaking most programs first, ties in the order run summaries use."""
        order = [
            group.signature for group in root_causes([r for r in findings if r.minify is not None])
        ]
        return sorted(
            self.causes.values(),
            key=lambda cause: (
                -len(cause.programs),
                order.index(cause.signature) if cause.signature in order else 0,
            ),
        )


def reduce_findings(
    findings: list[CaseResult],
    known: KnownCases,
    minify_timeout: float,
    progress: Callable[[str], None],
) -> tuple[list[HuntCause], list[str]]:
    """The causes of ``findings``, ranked, and the repros of the findings that could not be
    minified and attributed."""
    reduction = _Reduction(known, minify_timeout, progress)
    unreduced = [
        str(Path(finding.repro_path or "")) for finding in findings if not reduction.count(finding)
    ]
    return reduction.ranked(findings), unreduced
