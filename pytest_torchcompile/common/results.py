"""Plain records of what a run found: built on workers, shipped to the controller as dicts."""

from __future__ import annotations

import dataclasses
import enum
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pytest_torchcompile.common.leaves import LeafResult
from pytest_torchcompile.common.verdict import Status


class StopReason(enum.StrEnum):
    """Why a minification stopped."""

    MINIMAL = "minimal"
    """A 1-minimal failing graph was written."""
    TIME_BUDGET = "time_budget"
    """The budget ran out: the smallest failing graph found so far was written, not minimal."""
    NOT_REPRODUCED = "not_reproduced"
    """The repro's graph passes now, or fails another way: there is nothing to reduce."""
    REPRO_BROKEN = "repro_broken"
    """The repro itself cannot run (an op it calls is missing, its graph fails eagerly)."""
    CRASHED = "crashed"
    """The minifier could not judge candidates, or the process minifying died or failed."""
    INTERRUPTED = "interrupted"
    """The run stopped before this case was minified."""
    SPREAD = "spread"
    """The deviation shows in many ops and starts at none that fails alone or with its
    neighbours: what accumulated rounding looks like, with no graph to reduce to."""
    UNWRITTEN = "unwritten"
    """The case was minified, but its files could not be written (a read-only or full disk)."""

    @property
    def label(self) -> str:
        return _STOP_LABELS[self]


_STOP_LABELS = {
    StopReason.MINIMAL: "1-minimal",
    StopReason.TIME_BUDGET: "time budget hit: not minimal",
    StopReason.NOT_REPRODUCED: "the repro does not reproduce",
    StopReason.REPRO_BROKEN: "the repro is broken",
    StopReason.CRASHED: "the minifier crashed",
    StopReason.INTERRUPTED: "the run stopped first",
    StopReason.SPREAD: "no op where the deviation starts",
    StopReason.UNWRITTEN: "its files could not be written",
}


@dataclass(frozen=True)
class Deviation:
    """One intermediate of a failing graph, judged against its own fp64 value in the minifier's
    locate run: a point of the deviation along the graph."""

    value: str
    """The graph's name for the value (``relu_3``)."""
    op: str
    """The op that computes it (``aten.relu``)."""
    ratio: float | None
    """rmse(compiled, fp64) / rmse(eager, fp64); inf where eager is exact and compiled is not (an
    integer value that differs); None where no error was measured (allclose to eager, a
    non-finite pattern)."""
    passed: bool
    starts: bool = False
    """A deviation starts here: it deviates and no deviating value feeds it."""

    def __post_init__(self) -> None:
        if isinstance(self.ratio, str):  # "inf" or "nan" as the JSON report spells them
            object.__setattr__(self, "ratio", float(self.ratio))


@dataclass(frozen=True)
class MinifyStep:
    """The minifier's state after one candidate: its trajectory, point by point."""

    seconds: float
    ops_left: int
    """The ops of the smallest failing graph known then (the whole graph before one is)."""
    compiles: int


@dataclass
class MinifyResult:
    """What the reducer made of one failing case; ``note`` says how, or why not."""

    ops_before: int
    ops_after: int
    seconds: float
    compiles: int
    stop: StopReason
    path: str | None = None
    kernel_path: str | None = None
    note: str = ""
    ops: list[str] = field(default_factory=list)
    """The distinct ops of the minimal graph."""
    stage: str | None = None
    """Where the failure appears (``stages.StageAttribution.stage``); None when not attributed."""
    stage_summary: str = ""
    failure_type: str = ""
    """``accuracy``, or the exception type of a compile or runtime error."""
    stage_compiles: int = 0
    stage_seconds: float = 0.0
    """What finding the stage cost, beyond ``compiles`` and ``seconds`` (the minification's)."""
    judge_deaths: list[str] = field(default_factory=list)
    """How each judging child that died during the minification died (it was replaced)."""
    bug_report_path: str | None = None
    """``bug_report.md`` beside the minified repro: the text of a PyTorch issue for it."""
    deviation: list[Deviation] = field(default_factory=list)
    """Every floating intermediate of the case's graph, in graph order, as the locate run judged
    it (an accuracy failure's); empty where there was none."""
    trajectory: list[MinifyStep] = field(default_factory=list)
    """The search's steps, one per candidate judged."""

    @property
    def signature(self) -> str | None:
        """What failures with one root cause share: the minimal graph's ops, the stage and the
        failure type; None for a case not reduced and attributed."""
        if not self.ops or self.stage is None:
            return None
        return f"{' + '.join(self.ops)} | {self.stage_summary or self.stage} | {self.failure_type}"

    def __post_init__(self) -> None:
        # Plain strings and dicts when read back from JSON.
        self.stop = StopReason(self.stop)
        self.deviation = [
            point if isinstance(point, Deviation) else Deviation(**point)
            for point in self.deviation
        ]
        self.trajectory = [
            step if isinstance(step, MinifyStep) else MinifyStep(**step) for step in self.trajectory
        ]

    def summary_line(self, nodeid: str) -> str:
        return self._summary(nodeid) + "".join(
            f"\n  the judging process {how} and was replaced" for how in self.judge_deaths
        )

    def _summary(self, nodeid: str) -> str:
        if self.path is None:
            return f"not minified {nodeid}: {self.stop.label}" + (
                f": {self.note}" if self.note else ""
            )
        label = "" if self.stop is StopReason.MINIMAL else f" ({self.stop.label})"
        line = (
            f"minified {nodeid}: {self.ops_before} -> {self.ops_after} ops in {self.seconds:.1f} s, "
            f"{self.compiles} compiles{label}"
        )
        if not self.stage_summary:
            return line
        # The stage is looked for after the minification: its compiles come on top of those.
        return (
            f"{line}\n  {self.stage_summary} (stage found in {self.stage_compiles} more compiles, "
            f"{self.stage_seconds:.1f} s)"
        )


@dataclass
class CaseResult:
    """One check of one test: a fixture call; a failing graph of the test's plain ``torch.compile``
    calls; or the rest of those graphs, the ones that passed and the ones that could not be judged."""

    nodeid: str
    status: Status
    message: str = ""
    case_id: str | None = None
    reference: str = "fp64"
    worst_ratio: float | None = None
    leaves: list[LeafResult] = field(default_factory=list)
    repro_path: str | None = None
    repro_defect: str | None = None
    """Why the repro written for this check cannot run (a defect of the plugin), or None."""
    repro_unwritten: str | None = None
    """Why no repro could be written for this failing check (the disk is full, a symbolic link
    was in the way, ...), or None; the check's verdict stands."""
    minify: MinifyResult | None = None
    compile_seconds: float | None = None
    graph: str | None = None
    fallback_random: bool = False
    """Random ops were compiled with Inductor's ``fallback_random``, so that compiled code drew
    eager's numbers and could be judged."""
    graphs_judged: int | None = None
    """How many of the test's plain ``torch.compile`` graphs this check stands for as judged (a
    failing graph's check: 1); None for a check of the fixture or of a repro test."""
    unconfirmed: str | None = None
    """Why the failure this check found is not confirmed (status ``unconfirmed``): its repro,
    judged in a fresh process, does not fail as recorded."""
    unchecked: list[str] = field(default_factory=list)
    """What of the test's plain graphs could not be judged (a graph, or a judged graph's
    intermediates), each ``"<graph label>: <reason>"``."""

    def to_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["status"] = str(self.status)
        return data

    def with_messages(self, change: Callable[[str], str], paths: bool = False) -> CaseResult:
        """The check with its messages (its message, graph, reference, the reasons it was not
        confirmed or its repro not written or broken, what was unchecked, the minify note)
        passed through ``change``; with ``paths``, its files' paths too, for a text a reader
        reads rather than a tool."""

        def changed(text: str | None, path: bool = False) -> Any:
            return text if text is None or (path and not paths) else change(text)

        minify = self.minify and dataclasses.replace(
            self.minify,
            note=changed(self.minify.note),
            path=changed(self.minify.path, path=True),
            kernel_path=changed(self.minify.kernel_path, path=True),
            bug_report_path=changed(self.minify.bug_report_path, path=True),
        )
        return dataclasses.replace(
            self,
            message=changed(self.message),
            reference=changed(self.reference),
            repro_path=changed(self.repro_path, path=True),
            repro_defect=changed(self.repro_defect),
            repro_unwritten=changed(self.repro_unwritten),
            graph=changed(self.graph),
            unconfirmed=changed(self.unconfirmed),
            unchecked=[change(entry) for entry in self.unchecked],
            minify=minify,
        )

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CaseResult:
        values = dict(data)
        values["status"] = Status(values["status"])
        values["leaves"] = [
            LeafResult(
                **{
                    **leaf,
                    "shape": tuple(leaf["shape"]),
                    "max_error_index": tuple(leaf["max_error_index"])
                    if leaf.get("max_error_index") is not None
                    else None,
                }
            )
            for leaf in values.get("leaves", [])
        ]
        if values.get("minify") is not None:
            values["minify"] = MinifyResult(**values["minify"])
        return cls(**values)


@dataclass(frozen=True)
class MinifyProgress:
    """Told after every candidate: what a live progress line shows."""

    case: str
    ops_left: int
    compiles: int
    elapsed_s: float

    def describe(self) -> str:
        return f"{self.ops_left} ops left, {self.compiles} compiles, {self.elapsed_s:.1f} s"


PROGRESS_EVERY_S = 10.0
"""How often progress is written where a line cannot be rewritten in place (a log, a pipe, the
stderr xdist workers share)."""


class ProgressThrottle:
    """Says yes on its first call, then at most once every :data:`PROGRESS_EVERY_S`."""

    def __init__(self) -> None:
        self._last: float | None = None

    def __call__(self) -> bool:
        now = time.monotonic()
        if self._last is not None and now - self._last < PROGRESS_EVERY_S:
            return False
        self._last = now
        return True
