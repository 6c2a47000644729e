"""What a judging parent and its child say to each other, one frozen dataclass per message.

The parent sends a :class:`ChildSetup` first, then any number of requests; the child answers the
setup with :class:`Ready` or :class:`StartFailed`, and each request but :class:`Prepare` and
:class:`WarmUp` with one reply. Everything crosses the pipe pickled, so the types live here, in a
module both sides import.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import torch.fx

from pytest_torchcompile.common.kinds import FailureKind
from pytest_torchcompile.common.verdict import DEFAULT_TOLERANCE
from pytest_torchcompile.judging.capture import TensorSpec
from pytest_torchcompile.judging.case import ReproCase
from pytest_torchcompile.judging.judge import POST_AOT, GraphVerdict
from pytest_torchcompile.judging.stages import ExpectedFailure, StageAttribution
from pytest_torchcompile.torch_internals import graph_pickling
from pytest_torchcompile.torch_internals.ops import op_origins

PROTOCOL_VERSION = 1
"""Raised with any change to the messages below: a parent and a child of two installs of the
plugin (upgraded during a run) must not read each other's messages by another layout."""

PREPARED_KEPT = 8
"""Compiled graphs a child keeps for :meth:`IsolatedJudge.judge_prepared` (oldest dropped first)."""


@dataclass(frozen=True)
class JudgeSettings:
    """How a candidate is judged; the Inductor config and the device belong to the judge."""

    tol: float = DEFAULT_TOLERANCE
    check_non_float: bool = False
    grad_enabled: bool = False
    level: str = POST_AOT

    @classmethod
    def for_minifying(cls, case: ReproCase) -> JudgeSettings:
        # An accuracy candidate of a floating failure must keep a floating deviation: a flipped
        # bool mask that never reaches a floating output must not steer the reduction. A failure
        # that is wrong only in non-floating outputs has nothing else to keep.
        non_float = case.kind != FailureKind.ACCURACY or case.non_float_failure
        return cls(case.tol, case.check_non_float and non_float, case.grad_enabled, case.level)


VerdictFunction = Callable[[JudgeSettings, torch.fx.GraphModule, list[Any]], GraphVerdict]
"""Judges one candidate where it runs; module-level, so that it pickles by name to the child."""


@dataclass(frozen=True)
class StageQuery:
    """Which stage of the stack introduces a failure: how the graph is judged (its level among
    them) and how it fails."""

    settings: JudgeSettings
    failure: ExpectedFailure


@dataclass(frozen=True)
class GraphToPrepare:
    """A graph for a judging child to compile ahead of its inputs (:meth:`IsolatedJudge.prepare`)."""

    key: int
    config_source: str
    input_specs: list[TensorSpec]


Candidate = tuple[list[tuple[str, str | None, str | None]], bytes]
"""A candidate as sent to the child: the ops it calls with the modules that register them (the
child has not imported the test module or package that registered a custom op, and loading a
graph traces it), and the saved graph and inputs."""


def encode_candidate(gm: torch.fx.GraphModule, inputs: list[Any]) -> Candidate:
    required = [(origin.qualname, origin.module, origin.search_path) for origin in op_origins(gm)]
    return required, saved((gm, list(inputs)))


def saved(value: Any) -> bytes:
    """``value`` as ``torch.save`` writes it, for the child to load; graph modules in it as their
    graphs are, not traced again from their code (:mod:`graph_pickling`)."""
    buffer = io.BytesIO()
    torch.save(value, buffer, pickle_module=graph_pickling)
    return buffer.getvalue()


# --- the parent's messages ------------------------------------------------------------------


@dataclass(frozen=True)
class ChildSetup:
    """The first message to a child: everything that stays fixed across its candidates, and the
    version of the protocol the parent speaks (a child of another version refuses to start)."""

    config_source: str
    verdict_function: VerdictFunction
    single_visible_cuda_device: bool
    version: int = PROTOCOL_VERSION


@dataclass(frozen=True)
class Judge:
    """Judge a candidate with the setup's verdict function; answered by :class:`Judged`."""

    settings: JudgeSettings
    candidate: Candidate


@dataclass(frozen=True)
class Kernel:
    """The code Inductor generates for a candidate; answered by :class:`KernelSource`."""

    settings: JudgeSettings
    candidate: Candidate


@dataclass(frozen=True)
class Stage:
    """Which stage introduces a candidate's failure; answered by :class:`StageAttributed`."""

    query: StageQuery
    candidate: Candidate


@dataclass(frozen=True)
class Prepare:
    """Compile a graph ahead of its inputs, kept under ``graph.key``; not answered."""

    graph: GraphToPrepare
    candidate: Candidate


@dataclass(frozen=True)
class WarmUp:
    """Pay Inductor's one-time costs on the child's device now; not answered."""


@dataclass(frozen=True)
class JudgePrepared:
    """Judge the graph prepared under ``key`` on saved inputs, unless the sender's compiler code
    (``fingerprint``) differs from the child's; answered by :class:`Judged`."""

    key: int
    settings: JudgeSettings
    fingerprint: dict[str, str]
    inputs: bytes


Request = Judge | Kernel | Stage | Prepare | WarmUp | JudgePrepared


# --- the child's replies --------------------------------------------------------------------


@dataclass(frozen=True)
class Ready:
    """The child is set up and waits for requests."""


@dataclass(frozen=True)
class StartFailed:
    """The child could not be set up (it exits)."""

    error: str


@dataclass(frozen=True)
class Judged:
    """A verdict, and whether the candidate left the device unusable (the child then exits)."""

    verdict: GraphVerdict
    poisoned: bool


@dataclass(frozen=True)
class KernelSource:
    source: str | None


@dataclass(frozen=True)
class StageAttributed:
    attribution: StageAttribution


@dataclass(frozen=True)
class Unjudged:
    """The request was not carried out: the child could not load the candidate, or (given by the
    parent itself) the child died or hung."""

    verdict: GraphVerdict


Reply = Judged | KernelSource | StageAttributed | Unjudged
