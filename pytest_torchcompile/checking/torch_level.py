"""The judging of a test's plain graphs at the torch level: a torch-level graph's call judged on
its outputs where its post-AOT graphs pass (a wrong decomposition is already in the graph
Inductor receives, and shows only there), and a training call a backward followed judged end
to end, forward and backward, once the block ends (a backward that reads what the compiled
forward saved otherwise than eager's would is wrong only when both run)."""

from __future__ import annotations

import dataclasses
from typing import Any

import torch

from pytest_torchcompile.checking.attribution import TORCH_LEVEL_NOTE
from pytest_torchcompile.checking.graph_calls import (
    CallJudgement,
    again_at_full_fp32,
    gradient_paths,
    mean_loss,
    rule_named,
    training_call,
)
from pytest_torchcompile.checking.outcome import GraphOutcome
from pytest_torchcompile.checking.plain_tally import PlainTally
from pytest_torchcompile.common.leaves import LeafResult
from pytest_torchcompile.common.verdict import Comparison, Status
from pytest_torchcompile.judging.capture import DynamoGraph
from pytest_torchcompile.judging.judge import devices_of, error_signature
from pytest_torchcompile.judging.mutation import mutated_inputs
from pytest_torchcompile.judging.precision import at_full_fp32, full_fp32_precision
from pytest_torchcompile.judging.references import (
    either,
    nan_dependent_gradients,
    reference_results,
    run_graph,
    unwritten_elements,
)
from pytest_torchcompile.judging.seeding import generators_kept

TRAINING_NOTE = (
    "its post-AOT graphs pass on their own inputs: the deviation shows only when its compiled "
    "forward and backward run together (the backward reads what the compiled forward saved), "
    "so this repro holds the torch-level graph and compiles it through the whole stack, "
    "forward and backward"
)


_TrainingRuns = tuple[
    list[int],
    list[Any],
    tuple[list[Any], list[Any] | None, Exception | None],
    list[torch.Tensor | None] | None,
]
"""A training call run again (:meth:`TorchLevelJudge._training_runs`)."""


@dataclasses.dataclass
class _TrainingLeaves:
    """A training call's gradients and written inputs judged."""

    leaves: list[LeafResult]
    mutated: list[int]
    """The positions of the inputs the call writes into."""
    reference: str


class TorchLevelJudge:
    """Judges the torch-level graphs of a test's calls, its findings kept in ``tally``."""

    def __init__(
        self, tally: PlainTally, tol: float, training_tol: float, check_non_float: bool
    ) -> None:
        self.tally = tally
        self.tol = tol
        self.training_tol = training_tol
        self.check_non_float = check_non_float
        self.training_calls: list[tuple[DynamoGraph, list[Any], int]] = []
        """Calls of torch-level graphs whose outputs required grad: (graph, inputs, outputs
        returned)."""

    def observe(
        self, graph: DynamoGraph, inputs: list[Any], outputs: Any, given: list[Any]
    ) -> None:
        """Judge a torch-level graph's call on its outputs when its post-AOT graphs did not fail on
        their own; a training call (its outputs require grad) is kept, to be judged forward and
        backward once the block ends, if a backward ran (where its forward graph failed, for the
        gradients that failure then shows too)."""
        if not graph.judgeable():
            return
        if self.tally.lowered_failures(graph):
            if training_call(inputs, outputs):
                # Its gradients are shown beside its failing forward graph.
                self.training_calls.append((graph, inputs, len(outputs)))
            return
        compiled = graph.compiled
        if compiled is not None and not at_full_fp32(bool(devices_of(inputs))):
            outputs, given = again_at_full_fp32(lambda args: compiled(*args), inputs)
        with full_fp32_precision():
            self._judge_call(graph, inputs, outputs, given)

    def _judge_call(
        self, graph: DynamoGraph, inputs: list[Any], outputs: Any, given: list[Any]
    ) -> None:
        try:
            mutated = mutated_inputs(graph.gm, inputs)
            eager, fp64, fp64_error = reference_results(graph.gm, inputs, mutated=mutated)
        except Exception as error:
            self.tally.unchecked.append(
                f"{graph.label}: not judged: it raises when run eagerly on the inputs of its "
                f"compiled call ({error_signature(error, max_chars=300)})"
            )
            return
        reference = self.tally.reference(graph.label, graph.gm, inputs, fp64_error)
        leaves = CallJudgement(
            graph.gm,
            inputs,
            False,
            mutated,
            eager,
            fp64,
            "out",
            self.tol,
            self.check_non_float,
            unwritten_elements(graph.gm, inputs, mutated=mutated),
        ).measured([*outputs, *(given[index] for index in mutated)])
        failing = [leaf for leaf in leaves if not leaf.passed]
        if not failing:
            self.tally.stand_for_lowered(graph, Comparison(leaves).worst_ratio)
            if training_call(inputs, outputs):
                self.training_calls.append((graph, inputs, len(outputs)))
            return
        self.tally.failed(
            GraphOutcome(
                graph=graph.lowered[0],
                inputs=inputs,
                status=Status.FAIL_ACCURACY,
                message=f"{len(failing)} of {len(leaves)} outputs of {graph.label} deviate "
                f"beyond the {rule_named(reference)}",
                leaves=leaves,
                note=TORCH_LEVEL_NOTE,
                dynamo=graph,
                reference=reference,
            )
        )

    def judge_training_calls(self) -> None:
        """Judge end to end the training calls a backward followed (a backward graph lowered from
        theirs ran), after the test's own calls: what runs is only code the test ran (no backward
        is compiled for a call that had none), and nothing runs inside the test's calls."""
        for graph, inputs, returned in self.training_calls:
            if any(lowered.kind == "backward" and lowered.calls for lowered in graph.lowered):
                # Judged as the test's call ends, where pytest-timeout or Ctrl-C may stop it too.
                self.tally.stoppable(self._judge_training)(graph, inputs, returned)
        self.training_calls.clear()

    def _judge_training(self, graph: DynamoGraph, inputs: list[Any], returned: int) -> None:
        """One training call of :meth:`judge_training_calls`."""
        failed = self.tally.lowered_failures(graph)
        if not failed:
            self._judge_training_call(graph, inputs, returned)
        elif [self.tally.failures[index].graph.kind for index in failed] == ["forward"]:
            # A wrong loss rarely comes alone: the gradients its backward computes from the
            # forward's results are shown in its table, as the fixture's check shows them. A
            # backward graph that fails on its own shows them in its own.
            self._add_failing_gradients(failed[0], graph, inputs, returned)

    def _add_failing_gradients(
        self, failed: int, graph: DynamoGraph, inputs: list[Any], returned: int
    ) -> None:
        """The gradients (and written inputs) of a training call that its compiled forward and
        backward get wrong, added to the table of the failure at ``failed``: its forward graph's."""
        judged = self._training_leaves(graph, inputs, returned)
        if judged is None:
            return
        failing = [leaf for leaf in judged.leaves if not leaf.passed]
        if failing:
            self.tally.add_to_failure(failed, failing, len(judged.leaves))

    def _judge_training_call(self, graph: DynamoGraph, inputs: list[Any], returned: int) -> None:
        """Judge a training call end to end: the code it ran (Dynamo's compiled callable: the
        compiled forward, then the compiled backward of the mean of each floating output) run
        again on copies of its inputs, the gradients of every input that requires grad (parameters
        included) and the inputs it writes into against the graph's eager and fp64 forward and
        backward. A backward that reads what the compiled forward saved otherwise than eager's
        would (another layout) is wrong only here: each post-AOT graph re-run eagerly on its own
        inputs agrees with its compiled code. Copies only: the test's tensors get no gradient,
        its generators keep their states."""
        judged = self._training_leaves(graph, inputs, returned)
        if judged is None:
            return
        failing = [leaf for leaf in judged.leaves if not leaf.passed]
        if not failing:
            return
        written = " and written inputs" if judged.mutated else ""
        self.tally.failed(
            GraphOutcome(
                graph=graph.lowered[0],
                inputs=inputs,
                status=Status.FAIL_ACCURACY,
                message=f"{len(failing)} of {len(judged.leaves)} gradients{written} of "
                f"{graph.label} deviate beyond the {rule_named(judged.reference)} (its compiled "
                "forward and backward against eager's)",
                leaves=judged.leaves,
                note=TRAINING_NOTE,
                dynamo=graph,
                reference=judged.reference,
            )
        )

    def _training_leaves(
        self, graph: DynamoGraph, inputs: list[Any], returned: int
    ) -> _TrainingLeaves | None:
        """A training call's gradients and written inputs judged (:meth:`_judge_training_call`);
        None where they could not be judged (the reason in the tally's ``unchecked``)."""
        runs = self._training_runs(graph, inputs)
        if runs is None:
            return None
        mutated, compiled, (eager, fp64, fp64_error), unwritten = runs
        if len(compiled) != len(eager):
            self.tally.unchecked.append(
                f"{graph.label}: gradients not judged: its compiled call gives "
                f"{len(compiled)} outputs and gradients, eager {len(eager)}"
            )
            return None
        reference = self.tally.reference(graph.label, graph.gm, inputs, fp64_error)
        judgement = CallJudgement(
            mean_loss(graph.gm),
            inputs,
            True,
            mutated,
            eager,
            fp64,
            "out",
            self.training_tol,
            self.check_non_float,
            unwritten,
        )
        if any(not leaf.passed for leaf in judgement(compiled)):
            # Found only where a gradient fails: it costs two more forward and backward runs.
            with generators_kept():
                through_nan = nan_dependent_gradients(mean_loss(graph.gm), inputs, mutated, eager)
            if through_nan is not None:
                judgement = dataclasses.replace(judgement, unjudged=either(unwritten, through_nan))
        with generators_kept():
            leaves = judgement.measured(compiled)
        # Its outputs, judged as the call ran, are scaled here (mean_loss): its gradients and the
        # inputs it writes into are what is judged.
        outputs = {f"out[{index}]" for index in range(returned)}
        paths = gradient_paths(graph, inputs, returned)
        return _TrainingLeaves(
            [
                dataclasses.replace(leaf, path=paths.get(leaf.path, leaf.path))
                for leaf in leaves
                if leaf.path not in outputs
            ],
            mutated,
            reference,
        )

    def _training_runs(self, graph: DynamoGraph, inputs: list[Any]) -> _TrainingRuns | None:
        """A training call run again, compiled, eagerly and in fp64, forward and backward: the
        positions it writes into, the compiled results, the references (with what stopped the
        fp64 run) and the elements that depend on memory no op wrote; None where a run raised."""
        assert graph.compiled is not None
        try:
            with generators_kept():
                mutated = mutated_inputs(graph.gm, inputs)
                compiled = run_graph(
                    mean_loss(graph.compiled), inputs, backward=True, mutated=mutated
                )
                references = reference_results(
                    mean_loss(graph.gm), inputs, backward=True, mutated=mutated
                )
                unwritten = unwritten_elements(
                    mean_loss(graph.gm), inputs, backward=True, mutated=mutated
                )
        except Exception as error:
            if not any(lowered.compile_error or lowered.runtime_error for lowered in graph.lowered):
                self.tally.unchecked.append(
                    f"{graph.label}: gradients not judged: its forward and backward raised when "
                    f"run again ({error_signature(error, max_chars=300)})"
                )
            return None
        return mutated, compiled, references, unwritten
