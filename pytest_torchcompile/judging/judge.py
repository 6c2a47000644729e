"""Judge one graph on real inputs: compile it, run it, compare with eager and fp64.

A graph is post-AOT (what Inductor lowers: compiled by Inductor alone) or torch-level (what Dynamo
captures, before AOT autograd and Inductor's decompositions: compiled through the whole stack, so
that a wrong decomposition shows against eager of the undecomposed graph).

Shared by the plugin's per-graph checks, the minifier's candidates and every generated repro file,
whose source embeds this module (with the oracle's rule and the compile helper), so that a repro
judges exactly as the plugin did. Hence: torch and the standard library only.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from pytest_torchcompile.common.kinds import FailureKind
from pytest_torchcompile.common.leaves import LeafResult, LeafRule
from pytest_torchcompile.judging.copies import clone_values
from pytest_torchcompile.judging.mutation import mutated_inputs
from pytest_torchcompile.judging.precision import full_fp32_precision
from pytest_torchcompile.judging.references import (
    either,
    nan_dependent_gradients,
    reference_outputs,
    run_graph,
    unwritten_elements,
)
from pytest_torchcompile.judging.rule import error_signature, normalized_error
from pytest_torchcompile.judging.seeding import seeded_alike
from pytest_torchcompile.judging.tensor_comparison import (
    compare_tensor,
    written_only,
)
from pytest_torchcompile.torch_internals.graph_compile import compile_dynamo_graph, compile_graph
from pytest_torchcompile.torch_internals.random_ops import generator_state_outputs

FIXED_EXIT, REPRODUCED_EXIT, FAILS_DIFFERENTLY_EXIT, BROKEN_EXIT = 0, 1, 2, 3
"""A repro's exit statuses: the failure is gone, it reproduces, the graph fails another way, the
repro itself cannot run (an op it calls is missing, its graph cannot be built, or its graph fails
eagerly on its own inputs): it then says nothing about the compiler."""


class ReproBroken(Exception):
    """A repro that cannot run here: its file does not load, an op it calls is missing, its graph
    cannot be built."""


POST_AOT = "post_aot"


DYNAMO = "dynamo"
"""Graph levels: what Inductor lowers, and what Dynamo captures before AOT autograd."""


@dataclass
class GraphVerdict:
    """What one graph did: ``failure`` is None when compiled matches, else one of the kinds above."""

    failure: FailureKind | None
    leaves: list[LeafResult] = field(default_factory=list)
    error: str | None = None
    reference: str = "fp64"

    @property
    def worst_ratio(self) -> float | None:
        ratios = [leaf.ratio for leaf in self.leaves if leaf.ratio is not None]
        return max(ratios) if ratios else None


def same_failure(
    verdict: GraphVerdict, kind: str, expected_error: str | None, pattern: str | None
) -> bool:
    """Whether ``verdict`` fails the way the original case did (the minifier's interestingness)."""
    if verdict.failure != kind:
        return False
    if kind == FailureKind.ACCURACY:
        return True
    if pattern:
        return verdict.error is not None and re.search(pattern, verdict.error) is not None
    if expected_error is None or verdict.error is None:
        return True
    return normalized_error(verdict.error) == normalized_error(expected_error)


def devices_of(values: Sequence[Any]) -> set[torch.device]:
    return {v.device for v in values if isinstance(v, torch.Tensor) and v.device.type != "cpu"}


def synchronize(devices: set[torch.device]) -> None:
    """Wait for the kernels on ``devices``: they run asynchronously, and a device-side error
    must surface on the call that caused it, not at a later read."""
    for waited in devices:
        if waited.type == "cuda":
            torch.cuda.synchronize(waited)


def differentiating(inputs: Sequence[Any]) -> bool:
    """Whether a torch-level graph is judged forward and backward: grad mode is on and some
    input requires grad, as in the training call it was captured from."""
    return torch.is_grad_enabled() and any(
        isinstance(v, torch.Tensor) and v.requires_grad for v in inputs
    )


def judges_backward(level: str, inputs: Sequence[Any]) -> bool:
    """Whether a graph of that level is judged forward and backward on ``inputs``: a torch-level
    graph in a training call (:func:`differentiating`). Its references and its compiled results
    must both be taken so, or they differ in length."""
    return level == DYNAMO and differentiating(inputs)


def compare_graph_outputs(
    outputs: Sequence[Any],
    eager: Sequence[Any],
    fp64: Sequence[Any] | None,
    tol: float,
    check_non_float: bool,
    name: str = "graph_out",
    unjudged: Sequence[torch.Tensor | None] | None = None,
    mutated: Sequence[int] = (),
    noise: dict[str, float] | None = None,
    noise_from: dict[str, str] | None = None,
    not_values: Sequence[int] = (),
) -> list[LeafResult]:
    """Judge each tensor a compiled graph returned against the graph's own eager and fp64 results,
    but for the elements ``unjudged`` marks (:func:`unwritten_elements`,
    :func:`nan_dependent_gradients`); the last ones are the
    inputs at the positions ``mutated``, as :func:`run_graph` returns them. Compiled code that
    returns another number of results than eager (an op of several results whose graph node
    lists fewer) fails on that, as a wrong shape does. ``noise``, by leaf path
    (:func:`graph_result_paths`), is another legitimate evaluation's error from fp64, and
    ``noise_from`` names it (:func:`compare_tensor`). The results at the positions
    ``not_values`` are not judged (:func:`generator_state_outputs`)."""
    if len(outputs) != len(eager):
        return [
            LeafResult(
                name,
                (),
                "",
                False,
                LeafRule.METADATA,
                detail=f"compiled returned {len(outputs)} results, eager {len(eager)}",
            )
        ]
    masks = list(unjudged) if unjudged is not None else [None] * len(eager)
    paths = graph_result_paths(name, len(eager), mutated)
    return [
        compare_tensor(
            path,
            written_only(result, mask),
            written_only(expected, mask),
            written_only(fp64[index], mask) if fp64 is not None else None,
            tol,
            check_non_float,
            (noise or {}).get(path),
            (noise_from or {}).get(path),
        )
        for index, (path, result, expected, mask) in enumerate(
            zip(paths, outputs, eager, masks, strict=True)
        )
        if isinstance(expected, torch.Tensor)
        and isinstance(result, torch.Tensor)
        and index not in not_values
    ]


def graph_result_paths(name: str, results: int, mutated: Sequence[int]) -> list[str]:
    """The leaf path of each of a graph's ``results`` as :func:`run_graph` returns them: its
    outputs, then the inputs at the positions ``mutated``."""
    returned = results - len(mutated)
    return [f"{name}[{index}]" for index in range(returned)] + [
        mutated_input_path(index) for index in mutated
    ]


def mutated_input_path(position: int) -> str:
    """How a graph's input that it writes into is named among the judged results."""
    return f"graph_in[{position}] (mutated in place)"


def judge_graph(
    gm: torch.fx.GraphModule,
    inputs: Sequence[Any],
    tol: float,
    check_non_float: bool,
    references: tuple[list[Any], list[Any] | None] | None = None,
    compiler: Callable[[torch.fx.GraphModule, Sequence[Any]], Callable[..., Any]] | None = None,
    level: str = POST_AOT,
) -> GraphVerdict:
    """Compile ``gm`` with Inductor (a torch-level graph: through the whole stack; or with
    ``compiler``), run it on ``inputs`` and judge every output (a torch-level graph in a training
    call: every gradient too) and every input it writes into. ``references``: the eager and fp64
    results as :func:`reference_outputs` gives them, the inputs :func:`mutated_inputs` finds
    included.

    Non-floating outputs count only with ``check_non_float``: a minified candidate must keep a
    floating deviation, so a flipped bool mask cannot steer the reduction.
    """
    with full_fp32_precision():
        return _judge(gm, inputs, tol, check_non_float, references, compiler, level)


def _judge(
    gm: torch.fx.GraphModule,
    inputs: Sequence[Any],
    tol: float,
    check_non_float: bool,
    references: tuple[list[Any], list[Any] | None] | None,
    compiler: Callable[[torch.fx.GraphModule, Sequence[Any]], Callable[..., Any]] | None,
    level: str,
) -> GraphVerdict:
    backward = judges_backward(level, inputs)
    try:
        mutated = mutated_inputs(gm, inputs)
        eager, fp64 = (
            references
            if references is not None
            else reference_outputs(gm, inputs, backward, mutated)
        )
    except Exception as error:
        return GraphVerdict(FailureKind.EAGER_ERROR, error=error_signature(error))
    outputs = _compiled_results(gm, inputs, compiler, level, backward, mutated)
    if isinstance(outputs, GraphVerdict):
        return outputs
    leaves = _judged_results(
        gm, inputs, outputs, eager, fp64, tol, check_non_float, backward, mutated
    )
    failed = any(not leaf.passed for leaf in leaves)
    return GraphVerdict(
        FailureKind.ACCURACY if failed else None,
        leaves,
        reference="fp64" if fp64 is not None else "cosine",
    )


def _compiled_results(
    gm: torch.fx.GraphModule,
    inputs: Sequence[Any],
    compiler: Callable[[torch.fx.GraphModule, Sequence[Any]], Callable[..., Any]] | None,
    level: str,
    backward: bool,
    mutated: Sequence[int],
) -> list[Any] | GraphVerdict:
    """The compiled graph's results as :func:`run_graph` returns them, or the verdict of its
    compile or runtime error."""
    try:
        if compiler is None:
            compiler = compile_dynamo_graph if level == DYNAMO else compile_graph
        compiled = compiler(gm, clone_values(inputs))
    except Exception as error:
        return GraphVerdict(FailureKind.COMPILE_ERROR, error=error_signature(error))
    try:
        # A torch-level graph compiles on its first call: errors there are the compiler's too.
        with seeded_alike(gm):
            outputs = run_graph(compiled, inputs, backward, mutated)
        synchronize(devices_of([*inputs, *outputs]))
    except Exception as error:
        return GraphVerdict(FailureKind.RUNTIME_ERROR, error=error_signature(error))
    return outputs


def _judged_results(
    gm: torch.fx.GraphModule,
    inputs: Sequence[Any],
    outputs: Sequence[Any],
    eager: Sequence[Any],
    fp64: Sequence[Any] | None,
    tol: float,
    check_non_float: bool,
    backward: bool,
    mutated: Sequence[int],
) -> list[LeafResult]:
    """The compiled results judged (:func:`compare_graph_outputs`), but for the elements that are
    no values: memory no op wrote and, in a failing training graph, gradients through a NaN."""
    unjudged = unwritten_elements(gm, inputs, backward, mutated)
    not_values = generator_state_outputs(gm)

    def judged(unjudged: Sequence[torch.Tensor | None] | None) -> list[LeafResult]:
        return compare_graph_outputs(
            outputs,
            eager,
            fp64,
            tol,
            check_non_float,
            unjudged=unjudged,
            mutated=mutated,
            not_values=not_values,
        )

    leaves = judged(unjudged)
    if not backward or all(leaf.passed for leaf in leaves):
        return leaves
    # Found only for a failing training graph: it costs two more forward and backward runs.
    through_nan = nan_dependent_gradients(gm, inputs, mutated, eager)
    return leaves if through_nan is None else judged(either(unjudged, through_nan))
