"""Check the graphs of plain ``torch.compile`` calls a test makes, without changing the test.

While a test runs, every graph Inductor compiles is captured; each call of a captured graph is
judged on its real inputs against the same graph run eagerly in its own dtype and in fp64. Graph
breaks are fine: each graph is judged on its own, and the report names it (index, code location).
The torch-level graph each compile starts from is judged too, once its post-AOT graphs pass: a
wrong decomposition is already in the graph Inductor receives, and shows only there. A training
call (its outputs require grad) that a backward followed is judged there end to end too, forward
and backward, as the block ends: a backward that reads what the compiled forward saved otherwise
than eager's would is wrong only when both run.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.fx

from pytest_torchcompile.checking.aside import aside
from pytest_torchcompile.checking.attribution import TORCH_LEVEL_NOTE
from pytest_torchcompile.checking.floors import EAGER_SPREAD_FLOOR
from pytest_torchcompile.checking.masked import (
    ConcurrentProbes,
    ProbeChildren,
    device_of,
    find_masked_deviation,
)
from pytest_torchcompile.checking.outcome import GraphOutcome
from pytest_torchcompile.checking.runs import fp64_bytes
from pytest_torchcompile.common.leaves import LeafResult
from pytest_torchcompile.common.verdict import Comparison, Status, out_of_memory
from pytest_torchcompile.judging.capture import (
    CapturedGraph,
    DynamoGraph,
    GraphCapture,
    input_signature,
)
from pytest_torchcompile.judging.conditioning import conditioned, judged_discontinuous, nudged
from pytest_torchcompile.judging.copies import clone_values, traced_layout
from pytest_torchcompile.judging.isolation.config import config_patches
from pytest_torchcompile.judging.judge import (
    compare_graph_outputs,
    devices_of,
    differentiating,
    error_signature,
    graph_result_paths,
)
from pytest_torchcompile.judging.mutation import mutated_inputs
from pytest_torchcompile.judging.precision import at_full_fp32, full_fp32_precision
from pytest_torchcompile.judging.references import (
    either,
    fp64_results,
    nan_dependent_gradients,
    reference_results,
    run_graph,
    unwritten_elements,
)
from pytest_torchcompile.judging.reordering import noise_floors, raise_floors
from pytest_torchcompile.judging.seeding import (
    generators_kept,
    rng_states,
    seeded_alike,
    set_rng_states,
)
from pytest_torchcompile.judging.tensor_comparison import differing_elements, written_only
from pytest_torchcompile.torch_internals.config import inductor_config
from pytest_torchcompile.torch_internals.environment import (
    ENVIRONMENT_NOT_JUDGED,
    environment_failure,
)
from pytest_torchcompile.torch_internals.interception import intercept_inductor
from pytest_torchcompile.torch_internals.random_ops import generator_state_outputs
from pytest_torchcompile.torch_internals.rng import (
    EAGER_RNG_CONFIG,
    RandomDrawMismatch,
    recording_random_draws,
    replaying_random_draws,
)


class GraphChecker:
    """Judges each (graph, input shapes) pair once; collects failures for the running test."""

    def __init__(
        self,
        tol: float,
        check_non_float: bool,
        intermediates: bool,
        probe_children: ProbeChildren | None = None,
        training_tol: float | None = None,
        capture: GraphCapture | None = None,
        on_deviation: Callable[[str, str | None], None] | None = None,
        on_lowering: Callable[[CapturedGraph], None] | None = None,
    ) -> None:
        self.tol = tol
        self.on_deviation = on_deviation
        """Told the Inductor config source and device of each accuracy failure as it is found (the
        child that will confirm it starts while the test goes on)."""
        self.on_lowering = on_lowering
        """Told each graph Inductor receives from the block, before it compiles it."""
        self.training_tol = tol if training_tol is None else training_tol
        """For backward graphs and training calls judged end to end: gradients sum over a batch and
        carry the forward's rounding, as PyTorch's training accuracy runs allow for (the fixture's
        ``backward=True`` default too)."""
        self.check_non_float = check_non_float
        self.intermediates = intermediates
        self.probes = ConcurrentProbes(probe_children)
        self.capture = capture if capture is not None else GraphCapture(watching=False)
        """Where the watched compiles are recorded: a run's own (the checking runner's), so
        that code compiled in one test and called in another is judged there too."""
        self.failures: list[GraphOutcome] = []
        self.unchecked: list[str] = []
        """What could not be judged (a graph, or a judged graph's intermediates), each
        ``"<graph label>: <reason>"``."""
        self.without_fp64: dict[str, str] = {}
        """By graph label, why a graph judged on its outputs had no fp64 reference (the fp64 run
        raised, or did not fit in memory): it was judged by the same-precision rule."""
        self.judged: dict[int, float | None] = {}
        """Every graph judged on its outputs, by index: its worst error ratio over its calls
        (None while all its outputs are within allclose)."""
        self._judged: set[tuple[int, tuple[Any, ...]]] = set()
        self._probed: set[int] = set()
        """The graphs whose intermediates were judged (on their first call that passed)."""
        self._training_calls: list[tuple[DynamoGraph, list[Any], int]] = []
        """Calls of torch-level graphs whose outputs required grad: (graph, inputs, outputs returned)."""
        self._raised_eagerly: dict[int, list[str]] = {}
        """By index, the post-AOT graphs whose eager run raised, with their lines in
        :attr:`unchecked`: a judging of their torch-level graph stands for them."""

    def _stoppable(self, observe: Callable[..., None]) -> Callable[..., None]:
        """``observe``, a judging of a graph's call, leaving a line in :attr:`unchecked` where it
        is stopped from outside (pytest-timeout's signal fails the test from wherever it runs,
        Ctrl-C): the test's row then says why its graph has no verdict, and the test stops as
        it was told."""

        def observed(graph: CapturedGraph | DynamoGraph, *args: Any) -> None:
            try:
                observe(graph, *args)
            except Exception:
                raise
            except BaseException as stop:
                self.unchecked.append(
                    f"{graph.label}: not judged: the check was stopped before its verdict: "
                    f"{error_signature(stop, max_chars=300)}"
                )
                raise

        return observed

    def _reference(
        self, label: str, gm: torch.fx.GraphModule, inputs: list[Any], fp64_error: Exception | None
    ) -> str:
        """What a graph's call is judged against: ``fp64``, or where its fp64 run raised
        (``fp64_error``), the labelled same-precision check, which says why, as the fixture's
        check does; the graph's reason is kept in :attr:`without_fp64`."""
        if fp64_error is None:
            return "fp64"
        cause = (
            f"the fp64 reference does not fit in memory: the graph's inputs alone take "
            f"{fp64_bytes(gm, (tuple(inputs), {})) / 2**30:.2f} GiB in fp64"
            if out_of_memory(fp64_error)
            else "the graph cannot run in fp64"
        )
        self.without_fp64.setdefault(
            label, f"{cause} ({error_signature(fp64_error, max_chars=300)})"
        )
        return f"{SAME_PRECISION}: {label}: {self.without_fp64[label]}"

    def _observe(
        self, graph: CapturedGraph, inputs: list[Any], outputs: Any, given: list[Any]
    ) -> None:
        """Judge a call of one of the test's post-AOT graphs; one that draws random numbers drew
        Inductor's own as the test compiled it, unlike eager's, and is judged through a side
        compile of its torch-level graph instead (:meth:`_judge_random_graph`)."""
        compiled = graph.compiled
        if not graph.has_random_ops:
            if compiled is not None and not at_full_fp32(bool(devices_of(inputs))):
                outputs, given = _again_at_full_fp32(lambda args: compiled(list(args)), inputs)
            with full_fp32_precision():
                self._judge_call(graph, inputs, outputs, given)
        elif graph.dynamo is None:
            self.unchecked.append(
                f"{graph.label}: not judged: it draws random numbers, and the torch-level "
                "graph to judge it through, compiled aside, is unknown"
            )

    def _judge_call(
        self, graph: CapturedGraph, inputs: list[Any], outputs: Any, given: list[Any]
    ) -> None:
        key = (graph.index, input_signature(inputs))
        if key in self._judged:
            return
        self._judged.add(key)
        try:
            inputs, mutated, (eager, fp64, fp64_error) = _eager_references(graph, inputs)
        except RandomDrawMismatch as error:
            self.unchecked.append(
                f"{graph.label}: its eager run draws random numbers unlike the compiled "
                f"call ({error})"
            )
            return
        except Exception as error:
            line = (
                f"{graph.label}: not judged: it raises when run eagerly on the inputs of its compiled call "
                f"({error_signature(error, max_chars=300)})"
            )
            self._raised_eagerly.setdefault(graph.index, []).append(line)
            self.unchecked.append(line)
            return
        reference = self._reference(graph.label, graph.gm, inputs, fp64_error)
        tol = self.training_tol if graph.kind == "backward" else self.tol
        unjudged = unwritten_elements(graph.gm, inputs, mutated=mutated)
        judged = _Judgement(
            graph.gm,
            inputs,
            False,
            mutated,
            eager,
            fp64,
            f"{graph.kind}_out",
            tol,
            self.check_non_float,
            unjudged,
        )
        compiled_results = [*outputs, *(given[index] for index in mutated)]
        leaves = (
            judged(compiled_results)
            if graph.has_random_ops  # eager again would draw otherwise than the call did
            else judged.measured(compiled_results)
        )
        ratios = [
            ratio
            for ratio in (self.judged.get(graph.index), Comparison(leaves).worst_ratio)
            if ratio is not None
        ]
        self.judged[graph.index] = max(ratios, default=None)
        failing = [leaf for leaf in leaves if not leaf.passed]
        if not failing and (inconclusive := Comparison(leaves).inconclusive):
            self.unchecked.append(
                f"{graph.label}: {len(inconclusive)} output(s) inconclusive, "
                f"{inconclusive[0].path}: {inconclusive[0].detail}"
            )
        if failing:
            note = SIDE_RANDOM_NOTE if graph.has_random_ops else ""
            self._failed(
                GraphOutcome(
                    graph=graph,
                    inputs=inputs,
                    status=Status.FAIL_ACCURACY,
                    message=f"{len(failing)} of {len(leaves)} outputs of {graph.label} deviate beyond the {_rule(reference)}"
                    + (f"; {note}" if note else ""),
                    leaves=leaves,
                    fallback_random=graph.has_random_ops,
                    reference=reference,
                    recurs=_recurs(graph, inputs, mutated, judged),
                )
            )
        elif self.intermediates and graph.has_random_ops:
            self.unchecked.append(
                f"{graph.label}: intermediates not judged (the graph draws random numbers, "
                "which a recompiled cut would draw anew)"
            )
        elif self.intermediates and graph.index not in self._probed:
            # One probe per graph: a graph with dynamic shapes runs the same code at each size,
            # and a probe compiles anew for every one.
            self._probed.add(graph.index)
            try:
                deviation = find_masked_deviation(
                    graph.gm, inputs, tol, self.probes.prepared.get(graph.index)
                )
            except Exception as error:  # a defect of the probe, which must not fail the test's call
                self.unchecked.append(
                    f"{graph.label}: intermediates not judged: the probe raised "
                    f"({error_signature(error, max_chars=300)})"
                )
                return
            if deviation is not None:
                self._failed(
                    GraphOutcome(
                        graph=graph,
                        inputs=deviation.inputs,
                        status=Status.FAIL_ACCURACY,
                        message=f"{graph.label}: {deviation.message}",
                        leaves=[deviation.shown_leaf],
                        gm=deviation.gm,
                        note=deviation.note,
                    )
                )

    def _failed(self, failure: GraphOutcome) -> None:
        self.failures.append(failure)
        if self.on_deviation is not None:
            config_source = (
                failure.dynamo.config_source
                if failure.dynamo is not None
                else failure.graph.config_source
            )
            self.on_deviation(config_source, device_of(failure.inputs or []))

    def _observe_torch_level(
        self, graph: DynamoGraph, inputs: list[Any], outputs: Any, given: list[Any]
    ) -> None:
        """Judge a torch-level graph's call on its outputs when its post-AOT graphs did not fail on
        their own; a training call (its outputs require grad) is kept, to be judged forward and
        backward once the block ends, if a backward ran (where its forward graph failed, for the
        gradients that failure then shows too)."""
        if any(lowered.has_random_ops for lowered in graph.lowered):
            with full_fp32_precision():
                self._judge_random_graph(graph, inputs)
            return
        if not graph.judgeable():
            return
        if self._lowered_failed(graph):
            if _training_call(
                inputs, outputs
            ):  # its gradients are shown beside its failing forward graph
                self._training_calls.append((graph, inputs, len(outputs)))
            return
        compiled = graph.compiled
        if compiled is not None and not at_full_fp32(bool(devices_of(inputs))):
            outputs, given = _again_at_full_fp32(lambda args: compiled(*args), inputs)
        with full_fp32_precision():
            self._judge_torch_level_call(graph, inputs, outputs, given)

    def _judge_torch_level_call(
        self, graph: DynamoGraph, inputs: list[Any], outputs: Any, given: list[Any]
    ) -> None:
        try:
            mutated = mutated_inputs(graph.gm, inputs)
            eager, fp64, fp64_error = reference_results(graph.gm, inputs, mutated=mutated)
        except Exception as error:
            self.unchecked.append(
                f"{graph.label}: not judged: it raises when run eagerly on the inputs of its "
                f"compiled call ({error_signature(error, max_chars=300)})"
            )
            return
        reference = self._reference(graph.label, graph.gm, inputs, fp64_error)
        leaves = _Judgement(
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
        if failing:
            self._failed(
                GraphOutcome(
                    graph=graph.lowered[0],
                    inputs=inputs,
                    status=Status.FAIL_ACCURACY,
                    message=f"{len(failing)} of {len(leaves)} outputs of {graph.label} deviate beyond the {_rule(reference)}",
                    leaves=leaves,
                    note=TORCH_LEVEL_NOTE,
                    dynamo=graph,
                    reference=reference,
                )
            )
        else:
            self._stand_for_lowered(graph, Comparison(leaves).worst_ratio)
            if _training_call(inputs, outputs):
                self._training_calls.append((graph, inputs, len(outputs)))

    def _stand_for_lowered(self, graph: DynamoGraph, worst_ratio: float | None) -> None:
        """A torch-level graph judged and passing counts as judged for its first post-AOT graph
        where none of them was (each raised when run eagerly): their lines leave
        :attr:`unchecked`, so the summary counts the graph once, as judged."""
        raised = [
            lowered.index for lowered in graph.lowered if lowered.index in self._raised_eagerly
        ]
        if not raised or any(lowered.index in self.judged for lowered in graph.lowered):
            return
        for index in raised:
            for line in self._raised_eagerly.pop(index):
                self.unchecked.remove(line)
        self.judged[raised[0]] = worst_ratio

    def _judge_random_graph(self, graph: DynamoGraph, inputs: list[Any]) -> None:
        """Judge the post-AOT graphs of a torch-level graph that draws random numbers: compiled
        aside (the test's own compile stays as the test made it) with Inductor's
        ``fallback_random``, run from the generators' states before the test's call, so that its
        compiled and eager runs draw alike (:func:`_references_drawing_like`); each of its graphs is
        judged under the index of the test's graph it stands for."""
        if graph.rng_before_call is None:
            return
        standing_for = iter(graph.lowered)

        def stand_for(side_graph: CapturedGraph) -> None:
            side_graph.index = next(standing_for, side_graph).index

        side = GraphCapture(observer=self._judge_call, lowering_observer=stand_for)
        try:
            with inductor_config({**config_patches(graph.config_source), **EAGER_RNG_CONFIG}):
                compiled = torch.compile(
                    graph.gm, backend=side.backend(), fullgraph=True, dynamic=False
                )
                set_rng_states(graph.rng_before_call)
                compiled(*clone_values(inputs, keep_grad=True))
        except Exception as error:
            self.unchecked.append(
                f"{graph.label}: not judged: it draws random numbers, and its compile aside "
                f"with fallback_random raised ({error_signature(error, max_chars=300)})"
            )
        finally:
            side.stop()

    def _judge_training_calls(self) -> None:
        """Judge end to end the training calls a backward followed (a backward graph lowered from
        theirs ran), after the test's own calls: what runs is only code the test ran (no backward
        is compiled for a call that had none), and nothing runs inside the test's calls."""
        for graph, inputs, returned in self._training_calls:
            if any(lowered.kind == "backward" and lowered.calls for lowered in graph.lowered):
                # Judged as the test's call ends, where pytest-timeout or Ctrl-C may stop it too.
                self._stoppable(self._judge_training)(graph, inputs, returned)
        self._training_calls.clear()

    def _judge_training(self, graph: DynamoGraph, inputs: list[Any], returned: int) -> None:
        """One training call of :meth:`_judge_training_calls`."""
        failed = self._lowered_failures(graph)
        if not failed:
            self._judge_training_call(graph, inputs, returned)
        elif [self.failures[index].graph.kind for index in failed] == ["forward"]:
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
        leaves = judged[0]
        failing = [leaf for leaf in leaves if not leaf.passed]
        if failing:
            failure = self.failures[failed]
            self.failures[failed] = dataclasses.replace(
                failure,
                non_float_only=Comparison(failure.leaves).fails_only_in_non_float,
                leaves=[*failure.leaves, *failing],
                message=f"{failure.message}; {len(failing)} of {len(leaves)} results of its training call's "
                "backward deviate too",
            )

    def _judge_training_call(self, graph: DynamoGraph, inputs: list[Any], returned: int) -> None:
        """Judge a training call end to end: the code it ran (Dynamo's compiled callable: the
        compiled forward, then the compiled backward of the mean of each floating output) run
        again on copies of its inputs, the gradients of every input that requires grad (parameters
        included) and the inputs it writes into against the graph's eager and fp64 forward and
        backward. A backward
        that reads what the compiled forward saved otherwise than eager's would (another layout)
        is wrong only here: each post-AOT graph re-run eagerly on its own inputs agrees with its
        compiled code. Copies only: the test's tensors get no gradient, its generators keep
        their states."""
        judged = self._training_leaves(graph, inputs, returned)
        if judged is None:
            return
        leaves, mutated, reference = judged
        failing = [leaf for leaf in leaves if not leaf.passed]
        if failing:
            self._failed(
                GraphOutcome(
                    graph=graph.lowered[0],
                    inputs=inputs,
                    status=Status.FAIL_ACCURACY,
                    message=f"{len(failing)} of {len(leaves)} gradients{' and written inputs' if mutated else ''} of "
                    f"{graph.label} deviate beyond the {_rule(reference)} (its compiled forward and backward against "
                    "eager's)",
                    leaves=leaves,
                    note=TRAINING_NOTE,
                    dynamo=graph,
                    reference=reference,
                )
            )

    def _training_leaves(
        self, graph: DynamoGraph, inputs: list[Any], returned: int
    ) -> tuple[list[LeafResult], list[int], str] | None:
        """A training call's gradients and written inputs judged (:meth:`_judge_training_call`),
        and the positions of the inputs it writes into; None where they could not be judged (the
        reason in :attr:`unchecked`)."""
        assert graph.compiled is not None
        try:
            with generators_kept():
                mutated = mutated_inputs(graph.gm, inputs)
                compiled = run_graph(
                    _mean_loss(graph.compiled), inputs, backward=True, mutated=mutated
                )
                eager, fp64, fp64_error = reference_results(
                    _mean_loss(graph.gm), inputs, backward=True, mutated=mutated
                )
                unwritten = unwritten_elements(
                    _mean_loss(graph.gm), inputs, backward=True, mutated=mutated
                )
        except Exception as error:
            if not any(lowered.compile_error or lowered.runtime_error for lowered in graph.lowered):
                self.unchecked.append(
                    f"{graph.label}: gradients not judged: its forward and backward raised when "
                    f"run again ({error_signature(error, max_chars=300)})"
                )
            return None
        if len(compiled) != len(eager):
            self.unchecked.append(
                f"{graph.label}: gradients not judged: its compiled call gives "
                f"{len(compiled)} outputs and gradients, eager {len(eager)}"
            )
            return None
        reference = self._reference(graph.label, graph.gm, inputs, fp64_error)
        # Its outputs, judged as the call ran, are scaled here (_mean_loss): its gradients and the
        # inputs it writes into are what is judged.
        outputs = {f"out[{index}]" for index in range(returned)}
        paths = _gradient_paths(graph, inputs, returned)

        judgement = _Judgement(
            _mean_loss(graph.gm),
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
                through_nan = nan_dependent_gradients(_mean_loss(graph.gm), inputs, mutated, eager)
            if through_nan is not None:
                judgement = dataclasses.replace(judgement, unjudged=either(unwritten, through_nan))
        with generators_kept():
            leaves = judgement.measured(compiled)
        return (
            [
                dataclasses.replace(leaf, path=paths.get(leaf.path, leaf.path))
                for leaf in leaves
                if leaf.path not in outputs
            ],
            mutated,
            reference,
        )

    def _lowered_failed(self, graph: DynamoGraph) -> bool:
        """Whether a graph lowered from ``graph`` failed, or ``graph`` did (that failure says more)."""
        return bool(self._lowered_failures(graph))

    def _lowered_failures(self, graph: DynamoGraph) -> list[int]:
        """The positions in :attr:`failures` of the failures of graphs lowered from ``graph`` (or
        of ``graph``)."""
        lowered = set(map(id, graph.lowered))
        return [
            index for index, failure in enumerate(self.failures) if id(failure.graph) in lowered
        ]

    def error_failures(self, handled: bool) -> list[GraphOutcome]:
        """Graphs that failed to compile or whose compiled code raised; where the test ``handled``
        what they raised into it (its call returned), each is the test's (a ``pytest.raises``
        around a compile it expects to fail), reported as such. A compile error Dynamo suppressed
        (running the frame eagerly) reached no code of the test, and stays a failure."""
        failures = []
        for graph in self.capture.graphs:
            error = graph.compile_error or graph.runtime_error
            environment = environment_failure(error)
            if environment is not None:
                # No bug of the compiler's: no repro, no minification, no failure of the check.
                self.unchecked.append(
                    f"{graph.label}: not judged: {ENVIRONMENT_NOT_JUDGED}: "
                    f"{error_signature(environment, max_chars=300)}"
                )
            elif error is not None and handled and not graph.compile_error_suppressed:
                doing = "compiling" if graph.compile_error is not None else "running"
                failures.append(
                    GraphOutcome(
                        graph=graph,
                        inputs=[],
                        status=Status.HANDLED_ERROR,
                        message=f"{graph.label} raised {doing} "
                        f"({error_signature(error, max_chars=300)}), "
                        "and the test handled the error",
                    )
                )
            elif out_of_memory(error):
                failures.append(
                    GraphOutcome(
                        graph=graph,
                        inputs=[],
                        status=Status.OUT_OF_MEMORY,
                        message=f"{graph.label} ran out of memory "
                        f"{'compiling' if graph.compile_error else 'running'}",
                    )
                )
            elif graph.compile_error is not None:
                failures.append(
                    GraphOutcome(
                        graph=graph,
                        inputs=graph.synthesized_inputs(),
                        status=Status.FAIL_COMPILE,
                        message=f"Inductor failed to compile {graph.label}",
                    )
                )
            elif graph.runtime_error is not None and graph.runtime_inputs is not None:
                failures.append(
                    GraphOutcome(
                        graph=graph,
                        inputs=graph.runtime_inputs,
                        status=Status.FAIL_RUNTIME,
                        message=f"compiled code raised in {graph.label}",
                    )
                )
        return failures

    @contextlib.contextmanager
    def watching(self) -> Iterator[None]:
        """Judge the graphs the block compiles and the compiled graphs it calls (those compiled
        before it too, where they were compiled through :attr:`capture`). What the judging needs
        after the block is kept until :meth:`release`."""
        with (
            intercept_inductor(self.capture.hook, self.capture.dynamo_hook),
            self.capture.watch(
                _aside(self._stoppable(self._observe)),
                _aside(self._stoppable(self._observe_torch_level)),
                self._lowering,
            ),
        ):
            try:
                yield
            finally:
                if self._training_calls:
                    with aside(), full_fp32_precision():
                        self._judge_training_calls()
                self.unchecked += [
                    f"{graph.label}: not judged: {graph.unrecordable}"
                    for graph in self.capture.graphs
                    if graph.unrecordable is not None
                ]

    def _lowering(self, graph: CapturedGraph) -> None:
        if graph.unrecordable is not None:
            return
        if self.on_lowering is not None:
            # Called inside the test's compile, which nothing of the plugin's may fail.
            with contextlib.suppress(Exception):
                self.on_lowering(graph)
        if self.intermediates:
            self.probes.prepare(graph)

    def release(self) -> None:
        """Drop the copies of the watched calls' inputs; the compiled code stays Dynamo's."""
        self.capture.end_watch()


def _recurs(
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
class _Judgement:
    """One call of a graph judged against the graph's eager and fp64 results on its inputs (see
    :func:`compare_graph_outputs`), and, where that fails by the fp64 rule, against the other
    legitimate evaluations the fixture's check counts too (:meth:`measured`). Another run of the
    compiled code (:func:`_recurs`) is judged with what they found."""

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


def _training_call(inputs: list[Any], outputs: Any) -> bool:
    """Whether a torch-level graph's call is one a backward can follow: it differentiates its
    inputs and an output requires grad."""
    return differentiating(inputs) and any(
        isinstance(value, torch.Tensor) and value.requires_grad for value in outputs
    )


def _eager_references(
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


SAME_PRECISION = "same-precision cosine check"
"""How a check judged without an fp64 reference is labelled (the fixture's check says the same)."""


def _rule(reference: str) -> str:
    """The rule a failing graph's outputs were judged by, as its message names it."""
    return "fp64 rule" if reference == "fp64" else "cosine check"


SIDE_RANDOM_NOTE = (
    "the graph draws random numbers: judged as compiled aside with Inductor's fallback_random=True "
    "(the test's own compile keeps its config), so that compiled and eager runs draw the same "
    "numbers; the fp64 run replays eager's draws"
)


def _aside(observe: Callable[..., None]) -> Callable[..., None]:
    """``observe`` run as the plugin's work (:func:`aside`)."""

    def observed(*args: Any) -> None:
        with aside():
            observe(*args)

    return observed


def _again_at_full_fp32(
    call: Callable[[list[Any]], Any], inputs: list[Any]
) -> tuple[Any, list[Any]]:
    """A call of the test's compiled code made again, at full fp32 precision (where the test made
    it at another, which stays the test's), on copies of its inputs: its outputs, and the copies
    as it left them."""
    args = clone_values(inputs, keep_grad=True)
    with full_fp32_precision():
        return call(list(args)), args


TRAINING_NOTE = (
    "its post-AOT graphs pass on their own inputs: the deviation shows only when its compiled "
    "forward and backward run together (the backward reads what the compiled forward saved), "
    "so this repro holds the torch-level graph and compiles it through the whole stack, "
    "forward and backward"
)


def _mean_loss(module: Callable[..., Any]) -> Callable[..., Any]:
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


def _gradient_paths(graph: DynamoGraph, inputs: list[Any], returned: int) -> dict[str, str]:
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
