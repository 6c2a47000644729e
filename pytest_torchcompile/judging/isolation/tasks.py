"""What a judge does with one candidate, the same in a judging child as in this process."""

from __future__ import annotations

from typing import Any

import torch
import torch.fx

from pytest_torchcompile.common.kinds import FailureKind
from pytest_torchcompile.judging.copies import clone_values
from pytest_torchcompile.judging.isolation.protocol import JudgeSettings, StageQuery
from pytest_torchcompile.judging.judge import (
    DYNAMO,
    GraphVerdict,
    differentiating,
    error_signature,
    judge_graph,
)
from pytest_torchcompile.judging.stages import StageAttribution, attribute_stage
from pytest_torchcompile.torch_internals.compiling import generated_source
from pytest_torchcompile.torch_internals.graph_compile import compile_graph
from pytest_torchcompile.torch_internals.interception import post_aot_graphs


def judge_candidate(
    settings: JudgeSettings, gm: torch.fx.GraphModule, inputs: list[Any]
) -> GraphVerdict:
    """The real judging: ``judge_graph`` as a repro file runs it."""
    torch.manual_seed(0)
    try:
        with torch.set_grad_enabled(settings.grad_enabled):
            return judge_graph(
                gm, inputs, settings.tol, settings.check_non_float, level=settings.level
            )
    except Exception as error:
        # judge_graph classifies eager, compile and run failures itself; anything escaping it
        # is a fault of the judging, which must never pass for the failure being minified.
        return GraphVerdict(FailureKind.JUDGE_ERROR, error=error_signature(error))


def stage_of(
    query: StageQuery, gm: torch.fx.GraphModule, inputs: list[Any], config: dict[str, Any]
) -> StageAttribution:
    """:func:`stages.attribute_stage` under the query's settings; a fault of the attribution
    itself becomes an ``unattributed`` answer, never an exception."""
    torch.manual_seed(0)
    try:
        with torch.set_grad_enabled(query.settings.grad_enabled):
            return attribute_stage(
                gm,
                inputs,
                query.settings.level,
                query.settings.tol,
                query.failure,
                check_non_float=query.settings.check_non_float,
                config=config,
            )
    except Exception as error:
        return unattributed(query, error_signature(error))


def unattributed(query: StageQuery, error: str | None) -> StageAttribution:
    """The answer when attributing the stage itself failed (raised, crashed, hung)."""
    return StageAttribution(
        "unattributed",
        f"stage unknown: its attribution stopped on {error}",
        level=query.settings.level,
    )


def kernel_source(
    gm: torch.fx.GraphModule, inputs: list[Any], settings: JudgeSettings
) -> str | None:
    """The code Inductor generates for ``gm`` (for a torch-level graph: the post-AOT graphs it
    lowers to); None when it does not compile."""
    try:
        if settings.level == DYNAMO:
            with torch.set_grad_enabled(settings.grad_enabled and differentiating(inputs)):
                lowered = post_aot_graphs(gm, clone_values(inputs, keep_grad=True))
            return "\n\n".join(f"{kind} graph:\n{code}" for kind, code in lowered)
        compiled = compile_graph(gm, clone_values(inputs))
    except Exception:
        return None
    return generated_source(compiled)
