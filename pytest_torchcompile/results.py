"""Plain records of what a run found: built on workers, shipped to the controller as dicts."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from .oracle import LeafResult, Status


@dataclass
class MinifyResult:
    """What the reducer made of one failing case."""

    ops_before: int
    ops_after: int
    seconds: float
    compiles: int
    minimal: bool
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

    @property
    def signature(self) -> str | None:
        """What failures with one root cause share: the minimal graph's ops, the stage and the
        failure type; None for a case not reduced and attributed."""
        if not self.ops or self.stage is None:
            return None
        return f"{' + '.join(self.ops)} | {self.stage_summary or self.stage} | {self.failure_type}"

    def summary_line(self, nodeid: str) -> str:
        label = "" if self.minimal else " (time budget hit: not minimal)"
        line = (f"minified {nodeid}: {self.ops_before} -> {self.ops_after} ops in {self.seconds:.1f} s "
                f"({self.compiles} compiles){label}")
        if not self.stage_summary:
            return line
        return f"{line}\n  {self.stage_summary} ({self.stage_compiles} compiles, {self.stage_seconds:.1f} s)"


@dataclass
class CaseResult:
    """One check of one test: a fixture call, or one graph of a plain ``torch.compile`` call."""

    nodeid: str
    status: Status
    message: str = ""
    case_id: str | None = None
    reference: str = "fp64"
    worst_ratio: float | None = None
    leaves: list[LeafResult] = field(default_factory=list)
    repro_path: str | None = None
    minify: MinifyResult | None = None
    compile_seconds: float | None = None
    graph: str | None = None
    fallback_random: bool = False
    """Random ops were compiled with Inductor's ``fallback_random``, so that compiled code drew
    eager's numbers and could be judged."""

    def to_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["status"] = str(self.status)
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CaseResult:
        values = dict(data)
        values["status"] = Status(values["status"])
        values["leaves"] = [
            LeafResult(**{**leaf, "shape": tuple(leaf["shape"]),
                          "max_error_index": tuple(leaf["max_error_index"])
                          if leaf.get("max_error_index") is not None else None})
            for leaf in values.get("leaves", [])
        ]
        if values.get("minify") is not None:
            values["minify"] = MinifyResult(**values["minify"])
        return cls(**values)
