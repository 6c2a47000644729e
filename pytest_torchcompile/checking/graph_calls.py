"""The judging of one call of a plain graph: its eager and fp64 references (drawing the random
numbers its compiled call drew), the judgement of its results with the other legitimate
evaluations' floors, and its compiled code called again; a training call's loss and the names
of its gradients."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from pytest_torchcompile.checking.floors import EAGER_SPREAD_FLOOR
from pytest_torchcompile.common.leaves import LeafResult
from pytest_torchcompile.common.verdict import Comparison
from pytest_torchcompile.judging.capture import CapturedGraph, DynamoGraph
from pytest_torchcompile.judging.conditioning import conditioned, judged_discontinuous, nudged
from pytest_torchcompile.judging.copies import clone_values, traced_layout
from pytest_torchcompile.judging.judge import (
    compare_graph_outputs,
    differentiating,
    graph_result_paths,
)
from pytest_torchcompile.judging.mutation import mutated_inputs
from pytest_torchcompile.judging.precision import full_fp32_precision
from pytest_torchcompile.judging.references import fp64_results, reference_results, run_graph
from pytest_torchcompile.judging.reordering import noise_floors, raise_floors
from pytest_torchcompile.judging.seeding import rng_states, seeded_alike, set_rng_states
from pytest_torchcompile.judging.tensor_comparison import differing_elements, written_only
from pytest_torchcompile.torch_internals.random_ops import generator_state_outputs
from pytest_torchcompile.torch_internals.rng import (
    RandomDrawMismatch,
    recording_random_draws,
    replaying_random_draws,
)


def call_recurs(
    graph: CapturedGraph,
    inputs: list[Any],
    mutated: list[int],
    judged: Callable[[list[Any]], list[LeafResult]],
) -> bool:
    """Whether the test's compiled graph, called again on copies of a failing call's inputs,
    fails again. A call that raises says nothing of the first's deviation."""
    if graph.compiled is None:
        return False
    args = clone_values(inputs)
    try:
        with torch.no_grad():
            results = [*graph.compiled(list(args)), *(args[index] for index in mutated)]
    except Exception:
        return False
    return any(not leaf.passed for leaf in judged(results))


@dataclass
class CallJudgement:
    """One call of a graph judged against the graph's eager and fp64 results on its inputs (see
    :func:`compare_graph_outputs`), and, where that fails by the fp64 rule, against the other
    legitimate evaluations the fixture's check counts too (:meth:`measured`). Another run of the
    compiled code (:func:`call_recurs`) is judged with what they found."""

    module: Callable[..., Any]
    inputs: list[Any]
    backward: bool
    mutated: list[int]
    eager: list[Any]
    fp64: list[Any] | None
    name: str
    tol: float
    check_non_float: bool
    unjudged: list[torch.Tensor | None] | None
    floors: dict[str, float] = field(default_factory=dict)
    deciding: dict[str, str] = field(default_factory=dict)
    discontinuous: dict[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # The results that are a random op's generator state, not judged: scanned once.
        self.not_values = generator_state_outputs(self.module)

    def __call__(self, results: list[Any]) -> list[LeafResult]:
        leaves = compare_graph_outputs(
            results,
            self.eager,
            self.fp64,
            self.tol,
            self.check_non_float,
            self.name,
            self.unjudged,
            self.mutated,
            self.floors or None,
            self.deciding or None,
            self.not_values,
        )
        return judged_discontinuous(Comparison(leaves), self.discontinuous).leaves

    def measured(self, results: list[Any]) -> list[LeafResult]:
        """``results`` judged; where outputs fail by the fp64 rule, judged again with eager's
        spread (eager once more, where it disagrees with its first run: atomic adds on a GPU)
        and the outputs' conditioning (:func:`conditioned`), as the fixture's check is."""
        comparison = Comparison(self(results))
        if self.fp64 is None or not comparison.failing_by_fp64_rule:
            return comparison.leaves
        reference = self._by_path(self.fp64)
        again = self._by_path(self._run(self.inputs))
        first = self._by_path(self.eager)
        if any(differing_elements(first[path], value) is not None for path, value in again.items()):
            found = noise_floors(again, reference, reference, None)
            raise_floors(self.floors, self.deciding, found, EAGER_SPREAD_FLOOR)
        comparison, found = conditioned(
            comparison,
            lambda *_: Comparison(self(results)),
            lambda seed: self._by_path(self._run(self._nudged_inputs(seed))),
            reference,
            self.floors,
            self.deciding,
        )
        self.discontinuous.update(found)
        return comparison.leaves

    def _run(self, inputs: list[Any]) -> list[Any]:
        with seeded_alike(self.module):
            return run_graph(self.module, inputs, self.backward, self.mutated)

    def _nudged_inputs(self, seed: int) -> list[Any]:
        """The inputs (a model's weights among them) each nudged by a unit in the last place."""
        generator = torch.Generator().manual_seed(seed)
        return [nudged(value, generator) for value in self.inputs]

    def _by_path(self, results: list[Any]) -> dict[str, Any]:
        """Results by leaf path, the elements :attr:`unjudged` marks left out, as the floors of
        other evaluations take them (:func:`noise_floors`)."""
        masks = self.unjudged if self.unjudged is not None else [None] * len(results)
        return {
            path: written_only(value, mask)
            for path, value, mask in zip(
                graph_result_paths(self.name, len(results), self.mutated),
                results,
                masks,
                strict=True,
            )
            if isinstance(value, torch.Tensor)
        }


def training_call(inputs: list[Any], outputs: Any) -> bool:
    """Whether a torch-level graph's call is one a backward can follow: it differentiates its
    inputs and an output requires grad."""
    return differentiating(inputs) and any(
        isinstance(value, torch.Tensor) and value.requires_grad for value in outputs
    )


def eager_references(
    graph: CapturedGraph,
    inputs: list[Any],
) -> tuple[list[Any], list[int], tuple[list[Any], list[Any] | None, Exception | None]]:
    """The inputs a post-AOT graph is judged on, the positions it writes into, and its eager and
    fp64 results there: its call's own inputs or, where the graph raises eagerly on them, those
    inputs laid out as the graph was traced (:func:`traced_layout`: a backward graph's activations
    come in Inductor's layout), with what stopped the fp64 run, if anything. The compiled results
    are those of the call, on Inductor's layout."""
    try:
        return inputs, *_references(graph, inputs)
    except RandomDrawMismatch:
        raise
    except Exception:
        relaid = traced_layout(graph.gm, inputs)
        if relaid is None:
            raise
    return relaid, *_references(graph, relaid)


def _references(
    graph: CapturedGraph, inputs: list[Any]
) -> tuple[list[int], tuple[list[Any], list[Any] | None, Exception | None]]:
    mutated = mutated_inputs(graph.gm, inputs)
    return mutated, (
        _references_drawing_like(graph, inputs, mutated)
        if graph.has_random_ops
        else reference_results(graph.gm, inputs, mutated=mutated)
    )


def _references_drawing_like(
    graph: CapturedGraph, inputs: list[Any], mutated: list[int]
) -> tuple[list[Any], list[Any] | None, Exception | None]:
    """The graph run eagerly and in fp64, drawing the numbers its compiled call drew: compiled with
    ``fallback_random``, the call drew from eager's generators, whose states before it were kept;
    the fp64 run replays the eager run's draws. The generators are left as the call left them."""
    after = rng_states()
    assert graph.rng_before_call is not None
    set_rng_states(graph.rng_before_call)
    try:
        draws: list[tuple[Any, Any]] = []
        with recording_random_draws(draws):
            eager = run_graph(graph.gm, inputs, mutated=mutated)
        with replaying_random_draws(draws):
            fp64, fp64_error = fp64_results(graph.gm, inputs, mutated=mutated)
    finally:
        set_rng_states(after)
    return eager, fp64, fp64_error


def rule_named(reference: str) -> str:
    """The rule a failing graph's outputs were judged by, as its message names it."""
    return "fp64 rule" if reference == "fp64" else "cosine check"


def again_at_full_fp32(
    call: Callable[[list[Any]], Any], inputs: list[Any]
) -> tuple[Any, list[Any]]:
    """A call of the test's compiled code made again, at full fp32 precision (where the test made
    it at another, which stays the test's), on copies of its inputs: its outputs, and the copies
    as it left them."""
    args = clone_values(inputs, keep_grad=True)
    with full_fp32_precision():
        return call(list(args)), args


def mean_loss(module: Callable[..., Any]) -> Callable[..., Any]:
    """``module`` with each floating output divided by its number of elements, so that the
    backward of the summed outputs (:func:`run_graph`) is that of their means, as PyTorch's
    accuracy runs reduce a model's outputs to a loss: gradients then keep the scale of one output
    element, and the rule's absolute slack the weight it has on an output. (With sums, a
    gradient that cancels to nearly zero, a convolution's bias before batch norm, grows with the
    output's size, and the decomposed backward's rounding in it passed the slack.)"""

    def scaled(*args: Any) -> list[Any]:
        return [
            value / value.numel()
            if isinstance(value, torch.Tensor) and value.is_floating_point() and value.numel()
            else value
            for value in module(*args)
        ]

    return scaled


def gradient_paths(graph: DynamoGraph, inputs: list[Any], returned: int) -> dict[str, str]:
    """The names of the gradients among a training call's judged results (``out[i]`` past its
    ``returned`` outputs): each by the graph's input it is taken with respect to, named as Dynamo
    names it (``L_x_``, ``L_self_modules_conv_parameters_weight_``)."""
    placeholders = [str(node.target) for node in graph.gm.graph.nodes if node.op == "placeholder"]
    wrt = [
        index
        for index, value in enumerate(inputs)
        if isinstance(value, torch.Tensor) and value.requires_grad
    ]
    return {
        f"out[{returned + position}]": f"grad of {placeholders[index]}"
        for position, index in enumerate(wrt)
    }
