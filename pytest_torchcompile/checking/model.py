"""The fixture's check of a model: ``check_model`` runs it eagerly, in fp64 and compiled
(:mod:`eager`, :mod:`runs`, :mod:`compiled`), and judges each input set's results, against the
other legitimate evaluations' errors where the fp64 rule fails them (:mod:`floors`), into a
:class:`~pytest_torchcompile.checking.outcome.CheckOutcome`."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from pytest_torchcompile.checking.aside import aside
from pytest_torchcompile.checking.attribution import failing_graphs, masked_deviation
from pytest_torchcompile.checking.compiled import CompiledCache, CompiledRuns, compiled_runs, recurs
from pytest_torchcompile.checking.eager import (
    Baseline,
    EagerRuns,
    Spread,
    eager_baseline,
    eager_sets,
    spread_note,
)
from pytest_torchcompile.checking.floors import (
    DECOMPOSED_FLOOR,
    decomposed_floors,
    evaluation_floors,
    spread_floors,
)
from pytest_torchcompile.checking.masked import ProbeChildren, device_of
from pytest_torchcompile.checking.outcome import CheckOutcome, FailingGraph
from pytest_torchcompile.checking.runs import (
    describe,
    differentiable,
    fp64_reference,
    input_sets,
    judged_results,
)
from pytest_torchcompile.common.leaves import LeafResult
from pytest_torchcompile.common.settings import CheckOptions
from pytest_torchcompile.common.verdict import Comparison, Status
from pytest_torchcompile.judging.capture import CapturedGraph
from pytest_torchcompile.judging.conditioning import conditioned, judged_discontinuous
from pytest_torchcompile.judging.oracle import compare_outputs, flatten_outputs
from pytest_torchcompile.judging.precision import full_fp32_precision
from pytest_torchcompile.judging.reordering import Arguments, capped, raise_floors
from pytest_torchcompile.torch_internals.config import inductor_config


def check_model(
    fn: Callable[..., Any],
    args: Sequence[Any],
    kwargs: dict[str, Any] | None = None,
    options: CheckOptions | None = None,
    cache: CompiledCache | None = None,
    probe_children: ProbeChildren | None = None,
    on_deviation: Callable[[str, str | None], None] | None = None,
) -> CheckOutcome:
    """Check ``fn(*args, **kwargs)`` compiled by Inductor against eager and an fp64 reference.

    The caller's model and tensors are never mutated: every run works on copies. With ``cache``,
    a model checked again unchanged reuses its compiled code (training checks always recompile,
    since they change the compiled copy's weights). With ``probe_children``, the probes of the
    masked-deviation check compile in a child while the graph compiles here. ``on_deviation``
    is told the Inductor config source and device of a check as soon as its outputs deviate,
    before the rest of its verdict (a second evaluation, the failing graphs) is worked out: the
    child that will confirm the finding starts meanwhile.
    """
    options = options or CheckOptions()
    kwargs = dict(kwargs or {})
    arguments, gradient_note = differentiable(fn, (tuple(args), kwargs), options)
    if options.intermediates and options.backend == "inductor" and probe_children is not None:
        probe_children.start(device_of([*args, *kwargs.values()]))
    unjudged_sizes: list[str] = []
    with full_fp32_precision(), aside():
        outcome = _check(
            fn, arguments, options, cache, probe_children, on_deviation, unjudged_sizes
        )
    outcome.fallback_random = any(graph.has_random_ops for graph in outcome.graphs)
    notes = [gradient_note, *unjudged_sizes]
    if outcome.fallback_random:
        notes.append(FALLBACK_RANDOM_NOTE)
    outcome.message = "; ".join(part for part in (outcome.message, *notes) if part)
    return outcome


FALLBACK_RANDOM_NOTE = (
    "random ops compiled with Inductor's fallback_random=True: compiled and eager "
    "runs draw the same numbers, the fp64 run replays eager's draws"
)


def _check(
    fn: Callable[..., Any],
    given: Arguments,
    options: CheckOptions,
    cache: CompiledCache | None,
    probe_children: ProbeChildren | None,
    on_deviation: Callable[[str, str | None], None] | None,
    unjudged_sizes: list[str],
) -> CheckOutcome:
    """The steps of a check: eager twice (a model that disagrees with itself cannot be judged),
    eager on the other input sets, the fp64 references, the compiled runs, the comparison of each
    input set, then what passing outputs may hide (masked deviations) and what a pass is worth.
    ``unjudged_sizes`` is given a note for each size ``dynamic=True`` grew to that eager raises at
    (:func:`eager_sets`)."""
    eager = EagerRuns(fn, options)
    baseline = eager_baseline(eager, given, options)
    if isinstance(baseline, CheckOutcome):
        return baseline
    sets, eager_runs = eager_sets(eager, input_sets(given, options), baseline, unjudged_sizes)
    # The fp64 runs come before the compile: the fp64 copy of the model (twice its fp32 weights)
    # is gone before the compiled copy is made, never beside it.
    references = [
        fp64_reference(fn, arguments, options, baseline.mutated, baseline.draws_random)
        for arguments in sets
    ]
    compiled = compiled_runs(fn, sets, eager_runs, options, cache, probe_children)
    if isinstance(compiled, CheckOutcome):
        return compiled
    judge = _SetJudge(fn, options, eager, baseline, compiled.entry.capture.graphs, on_deviation)
    comparison = Comparison([])
    for index, ((arguments, eager_run, compiled_run), (reference, label)) in enumerate(
        zip(compiled.results, references, strict=True)
    ):
        spread = baseline.spread if index == 0 else None
        comparison, rejudge = judge.judge(arguments, eager_run, compiled_run, reference, spread)
        if not comparison.passed:
            failing = _Failing(arguments, comparison, label, rejudge)
            return _failing_outcome(compiled, baseline, failing, options)
    outcome = _passing_outcome(compiled, baseline, comparison, references[-1][1], options)
    return _within_spread(outcome, baseline.spread)


@dataclass
class _Failing:
    """An input set whose outputs fail, as judged, with the same judgement of another run."""

    arguments: Arguments
    comparison: Comparison
    reference_label: str
    rejudge: Callable[[tuple[dict[str, Any], list[Any]]], Comparison]


def _failing_outcome(
    compiled: CompiledRuns, baseline: Baseline, failing: _Failing, options: CheckOptions
) -> CheckOutcome:
    """The outcome of an input set whose outputs fail, with the graphs to blame and whether the
    compiled model fails again."""
    comparison = failing.comparison
    where = f" at {describe(failing.arguments)}" if len(compiled.results) > 1 else ""
    rule = "fp64 rule" if failing.reference_label == "fp64" else "cosine check"
    message = comparison.structure_error or (
        f"{len(comparison.failing)} of {len(comparison.leaves)} outputs deviate beyond the "
        f"{rule}{where}"
    )
    if baseline.spread is not None:
        message += f"; {spread_note(baseline.spread)}, which was counted"
    graphs = compiled.entry.capture.graphs
    blamed = failing_graphs(graphs, compiled.entry.capture.dynamo_graphs, options)
    return CheckOutcome(
        Status.FAIL_ACCURACY,
        message,
        comparison,
        failing.reference_label,
        graphs,
        blamed,
        compiled.seconds,
        recurs=recurs(compiled.entry, failing.arguments, options, failing.rejudge),
    )


def _within_spread(outcome: CheckOutcome, spread: Spread | None) -> CheckOutcome:
    """A passing outcome of a model whose eager disagrees with itself: where deterministic
    kernels agree, eager's baseline is theirs, a pass; else the verdict rests on eager's spread
    alone, and says so."""
    if spread is None or outcome.status is not Status.PASS:
        return outcome
    outcome.status = Status.PASS if spread.settled else Status.EAGER_NONDETERMINISTIC
    outcome.message = f"{spread_note(spread)}: compiled code is within the spread of its runs"
    return outcome


@dataclass
class _Compared:
    """One input set's results as compared: the compiled run's, eager's, the fp64 reference's
    (None without one) and, by leaf path, the elements left out of the comparison."""

    compiled: dict[str, Any]
    eager: dict[str, Any]
    reference: dict[str, Any] | None
    options: CheckOptions
    unjudged: dict[str, torch.Tensor] | None

    def __call__(
        self, noise: dict[str, float] | None = None, noise_from: dict[str, str] | None = None
    ) -> Comparison:
        """The comparison, measured against the ``noise`` floors where given."""
        leaves: list[LeafResult] = []
        for root, value in self.eager.items():
            part = compare_outputs(
                self.compiled[root],
                value,
                self.reference[root] if self.reference is not None else None,
                self.options.tolerance,
                not self.options.ignore_non_float,
                root=root,
                unjudged=self.unjudged,
                noise=noise,
                noise_from=noise_from,
            )
            if part.structure_error:
                return part
            leaves += part.leaves
        return Comparison(leaves)


@dataclass
class _SetJudge:
    """The judging of a check's input sets, with what stays alike across them."""

    fn: Callable[..., Any]
    options: CheckOptions
    eager: EagerRuns
    baseline: Baseline
    graphs: list[CapturedGraph]
    on_deviation: Callable[[str, str | None], None] | None

    def judge(
        self,
        arguments: Arguments,
        eager_run: tuple[dict[str, Any], list[Any]],
        compiled_run: tuple[dict[str, Any], list[Any]],
        reference: dict[str, Any] | None,
        spread: Spread | None,
    ) -> tuple[Comparison, Callable[[tuple[dict[str, Any], list[Any]]], Comparison]]:
        """One input set's outputs judged; where they fail by the fp64 rule, judged again against
        the second legitimate evaluations' errors (run only then), which may overturn it
        (:meth:`_floored`), then against their conditioning. With the comparison, the same
        judgement of another compiled run (its masks and floors as found here)."""
        mutated = self.baseline.mutated
        compared = _Compared(
            judged_results(*compiled_run, mutated),
            judged_results(*eager_run, mutated),
            reference,
            self.options,
            self.eager.unwritten(arguments, eager_run, mutated),
        )
        compared, comparison = self._through_nan(compared, arguments, eager_run)
        if not comparison.passed:
            self._tell_deviation(arguments)
        floors: dict[str, float] = {}
        deciding: dict[str, str] = {}
        if reference is not None and comparison.failing_by_fp64_rule:
            comparison = self._floored(compared, reference, arguments, spread, floors, deciding)
        discontinuous: dict[str, float] = {}
        if not comparison.passed and reference is not None:
            # The output's conditioning: how far a rounding-sized change of the inputs and weights
            # moves it (a jump across a tie: max pooling, a ReLU's edge, a floor).
            comparison, discontinuous = conditioned(
                comparison,
                compared,
                lambda seed: judged_results(*self.eager.run(arguments, nudged=seed), mutated),
                reference,
                floors,
                deciding,
            )

        def rejudge(run: tuple[dict[str, Any], list[Any]]) -> Comparison:
            again = dataclasses.replace(compared, compiled=judged_results(*run, mutated))
            return judged_discontinuous(again(floors or None, deciding or None), discontinuous)

        return comparison, rejudge

    def _through_nan(
        self,
        compared: _Compared,
        arguments: Arguments,
        eager_run: tuple[dict[str, Any], list[Any]],
    ) -> tuple[_Compared, Comparison]:
        """The comparison, and where a gradient fails, the comparison again without the elements
        of eager's gradients that depend on a value its forward computed as NaN."""
        comparison = compared()
        if comparison.passed or not any(
            leaf.path.startswith("grad") for leaf in comparison.failing
        ):
            return compared, comparison
        # Found only where a gradient fails: it costs two more eager forward and backward runs.
        through_nan = self.eager.nan_dependent_gradients(arguments, eager_run)
        if not through_nan:
            return compared, comparison
        compared = dataclasses.replace(compared, unjudged=_either(compared.unjudged, through_nan))
        return compared, compared()

    def _tell_deviation(self, arguments: Arguments) -> None:
        if self.on_deviation is not None and self.graphs:
            self.on_deviation(
                self.graphs[0].config_source,
                device_of(list(arguments[0]) + list(arguments[1].values())),
            )

    def _floored(
        self,
        compared: _Compared,
        reference: dict[str, Any],
        arguments: Arguments,
        spread: Spread | None,
        floors: dict[str, float],
        deciding: dict[str, str],
    ) -> Comparison:
        """The comparison against the errors of eager on the batch reversed and in channels-last
        layout and, where eager disagrees with itself (``spread``), of its second run; where
        outputs still fail, of Inductor's decomposed graphs run eagerly
        (:func:`decomposed_floors`). ``floors`` and ``deciding`` are given what was found."""
        mutated = self.baseline.mutated
        floors.update(
            evaluation_floors(
                self.fn,
                arguments,
                self.options,
                mutated,
                reference,
                self.eager.run,
                self.baseline.draws_random,
            )
        )
        spread_floors(
            floors, deciding, spread.runs if spread is not None else [], mutated, reference
        )
        comparison = compared(floors, deciding or None)
        if not (
            comparison.failing_by_fp64_rule
            and self.options.backend == "inductor"
            and not self.baseline.draws_random
            and _capped_floors_could_pass(compared, reference, floors, comparison)
        ):
            return comparison
        decomposed = decomposed_floors(
            self.fn, arguments, self.options, mutated, reference, compared.eager
        )
        if raise_floors(floors, deciding, decomposed, DECOMPOSED_FLOOR):
            comparison = compared(floors, deciding)
        return comparison


def _either(
    first: dict[str, torch.Tensor] | None, second: dict[str, torch.Tensor]
) -> dict[str, torch.Tensor]:
    """By leaf path, the elements that one set of masks or the other marks."""
    merged = dict(first or {})
    for path, mask in second.items():
        merged[path] = merged[path] | mask if path in merged else mask
    return merged


def _capped_floors_could_pass(
    compared: _Compared,
    reference: dict[str, Any],
    floors: dict[str, float],
    comparison: Comparison,
) -> bool:
    """Whether floors of at most ``DECOMPOSED_CAP`` times eager's error (what the decomposed
    graphs can give) could make an output that fails by the fp64 rule pass: where even the
    largest cannot, the decomposed graphs are not run (their compiles and runs cost a failing
    check seconds, and their verdict could only be the same)."""
    failing = comparison.failing_by_fp64_rule
    largest = capped(dict.fromkeys(failing, math.inf), compared.eager, reference)
    ceiling = {
        **floors,
        **{path: max(floor, floors.get(path, 0.0)) for path, floor in largest.items()},
    }
    return any(leaf.passed for leaf in compared(ceiling).leaves if leaf.path in failing)


def _passing_outcome(
    compiled: CompiledRuns,
    baseline: Baseline,
    comparison: Comparison,
    reference_label: str,
    options: CheckOptions,
) -> CheckOutcome:
    """Where every output passed: a deviation a later op masks fails it yet; results that hold
    no tensor, or outputs no result in their dtype can judge, are told apart from a pass."""
    graphs, seconds = compiled.entry.capture.graphs, compiled.seconds
    masked = _masked_outcome(compiled, comparison, reference_label, options)
    if masked is not None:
        return masked
    judged = judged_results(baseline.parts, baseline.call_args, baseline.mutated)
    kinds = {type(leaf) for root in judged for _, leaf in flatten_outputs(judged[root], root)}
    if not any(issubclass(kind, torch.Tensor | float) for kind in kinds):
        names = sorted({kind.__name__ for kind in kinds})
        status, message = (
            Status.NOT_JUDGED,
            f"nothing judged: the results hold no tensor (only {', '.join(names)})",
        )
    elif inconclusive := comparison.inconclusive:
        status, message = (
            Status.INCONCLUSIVE,
            f"{len(inconclusive)} of {len(comparison.leaves)} outputs "
            f"inconclusive, {inconclusive[0].path}: {inconclusive[0].detail}",
        )
    else:
        status = Status.PASS if reference_label == "fp64" else Status.NO_FP64_REFERENCE
        message = ""
    return CheckOutcome(
        status, message, comparison, reference_label, graphs, compile_seconds=seconds
    )


def _masked_outcome(
    compiled: CompiledRuns, comparison: Comparison, reference_label: str, options: CheckOptions
) -> CheckOutcome | None:
    """The failing outcome of passing outputs where a later op masks an intermediate's
    deviation (:func:`masked_deviation`); None where the check looks for none or finds none."""
    if not options.intermediates or options.backend != "inductor":
        return None
    graphs = compiled.entry.capture.graphs
    with inductor_config(options.inductor_config):
        masked = masked_deviation(graphs, compiled.entry.probes, options)
    if masked is None:
        return None
    graph, deviation = masked
    return CheckOutcome(
        Status.FAIL_ACCURACY,
        f"{graph.label}: {deviation.message}",
        dataclasses.replace(comparison, leaves=[*comparison.leaves, deviation.shown_leaf]),
        reference_label,
        graphs,
        [FailingGraph(graph, deviation.inputs, deviation.gm, deviation.note)],
        compiled.seconds,
    )
