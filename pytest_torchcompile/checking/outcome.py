"""What a check ends in: its outcome, the graphs it blames, and how an error raised while
compiling or running the compiled model becomes an outcome."""

from __future__ import annotations

import traceback
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.fx

from pytest_torchcompile.common.leaves import LeafResult
from pytest_torchcompile.common.verdict import Comparison, Status, out_of_memory
from pytest_torchcompile.judging.capture import CapturedGraph, DynamoGraph
from pytest_torchcompile.judging.judge import error_signature
from pytest_torchcompile.torch_internals.environment import (
    ENVIRONMENT_NOT_JUDGED,
    environment_failure,
)


@dataclass
class FailingGraph:
    """A captured graph that fails, the inputs it fails on, and (for a masked deviation) the cut
    of it that fails on its own outputs: what its repro is written from, on either path."""

    graph: CapturedGraph
    inputs: list[Any] | None
    gm: torch.fx.GraphModule | None = None
    note: str = ""
    dynamo: DynamoGraph | None = None
    """Set when the failure shows only at the torch level (a wrong decomposition): ``inputs``
    are then that graph's, and its repro compiles it through the whole stack."""
    non_float_only: bool = False
    """The graph's own failing outputs are all non-floating, whatever the check's were: a
    training check's gradients wrong through the indices its forward graph saves."""


@dataclass(kw_only=True)
class GraphOutcome(FailingGraph):
    """A plain ``torch.compile`` graph's check that failed: the failing graph with its verdict
    (the fixture's check holds its verdict in its :class:`CheckOutcome`)."""

    status: Status
    message: str
    leaves: list[LeafResult] = field(default_factory=list)
    fallback_random: bool = False
    reference: str = "fp64"
    """``fp64``, or the label of the same-precision check the graph was judged by without it."""
    recurs: bool = False
    """The test's compiled code, run again on the same inputs, fails again: the deviation recurs
    in this process (see :attr:`CheckOutcome.recurs`)."""


@dataclass
class CheckOutcome:
    status: Status
    message: str
    comparison: Comparison | None = None
    reference: str = "fp64"
    graphs: list[CapturedGraph] = field(default_factory=list)
    failing_graphs: list[FailingGraph] = field(default_factory=list)
    compile_seconds: float | None = None
    error: BaseException | None = None
    fallback_random: bool = False
    """The compiled graphs draw random numbers, through eager's generator (Inductor's
    ``fallback_random``), so eager and compiled runs seeded alike draw the same numbers."""
    recurs: bool = False
    """A failing check's compiled model, run again on the same inputs, fails again: the
    deviation recurs in this process, so the test fails whether or not its repro reproduces
    it in a fresh process (:class:`~pytest_torchcompile.checking.confirmation.Unreproduced`)."""

    @property
    def passed(self) -> bool:
        return self.status in (
            Status.PASS,
            Status.NO_FP64_REFERENCE,
            Status.INCONCLUSIVE,
            Status.NOT_JUDGED,
            Status.EAGER_NONDETERMINISTIC,
        )


class EagerRunError(Exception):
    """The model raised when run eagerly: a defect of the test, not of the compiler."""


def compiler_error_outcome(
    error: BaseException, graphs: list[CapturedGraph], elapsed: float
) -> CheckOutcome:
    """The outcome of a check whose compile or compiled run raised ``error``: the environment's
    fault or a lack of memory (no repro), else the first graph that failed to compile or whose
    compiled code raised, or Dynamo before any graph reached Inductor."""
    status, message, failing = _compiler_error(error, graphs)
    return CheckOutcome(
        status,
        message,
        graphs=graphs,
        failing_graphs=failing,
        compile_seconds=elapsed,
        error=error,
    )


def _compiler_error(
    error: BaseException, graphs: list[CapturedGraph]
) -> tuple[Status, str, list[FailingGraph]]:
    errors = [error, *(graph.compile_error or graph.runtime_error for graph in graphs)]
    environment = next(filter(None, map(environment_failure, errors)), None)
    if environment is not None:
        # The compiler is not at fault: no repro, no minification.
        return (
            Status.NOT_JUDGED,
            f"{ENVIRONMENT_NOT_JUDGED}: {error_signature(environment, max_chars=300)}; "
            "the model ran eagerly",
            [],
        )
    if any(map(out_of_memory, errors)):
        return (
            Status.OUT_OF_MEMORY,
            "compiling or running the compiled model ran out of memory: "
            f"{error_signature(error, max_chars=300)}",
            [],
        )
    return _graph_error(error, graphs)


def _graph_error(
    error: BaseException, graphs: list[CapturedGraph]
) -> tuple[Status, str, list[FailingGraph]]:
    """The compiler's error: the first graph that failed to compile, else the first whose
    compiled code raised, else Dynamo's before any graph reached Inductor."""
    if failed := next((g for g in graphs if g.compile_error is not None), None):
        return (
            Status.FAIL_COMPILE,
            f"Inductor failed to compile {failed.label}: "
            f"{error_signature(failed.compile_error or error, max_chars=300)}",
            [FailingGraph(failed, None)],
        )
    if failed := next((g for g in graphs if g.runtime_error is not None), None):
        return (
            Status.FAIL_RUNTIME,
            f"compiled code raised in {failed.label}: "
            f"{error_signature(failed.runtime_error or error, max_chars=300)}",
            [FailingGraph(failed, failed.calls[-1] if failed.calls else None)],
        )
    where = "".join(traceback.format_exception_only(error)).strip().splitlines()[0]
    return Status.FAIL_COMPILE, f"torch.compile raised before Inductor lowered a graph: {where}", []
