"""The fixture's check of a model: ``check_model`` runs it eagerly, in fp64 and compiled
(:mod:`eager`, :mod:`runs`, :mod:`compiled`), and judges each input set's results, against the
other legitimate evaluations' errors where the fp64 rule fails them (:mod:`floors`), into a
:class:`~pytest_torchcompile.checking.outcome.CheckOutcome`."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from typing import Any

import torch
import torch.fx

from pytest_torchcompile.checking.aside import aside
from pytest_torchcompile.checking.attribution import (
    failing_graphs,
    masked_deviation,
)
from pytest_torchcompile.checking.compiled import (
    CompiledCache,
    CompiledRuns,
    compiled_runs,
    recurs,
)
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
    EAGER_SPREAD_FLOOR,
    decomposed_floors,
    evaluation_floors,
)
from pytest_torchcompile.checking.masked import (
    ProbeChildren,
    device_of,
)
from pytest_torchcompile.checking.outcome import (
    CheckOutcome,
    FailingGraph,
)
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
from pytest_torchcompile.judging.oracle import (
    compare_outputs,
    flatten_outputs,
)
from pytest_torchcompile.judging.precision import full_fp32_precision
from pytest_torchcompile.judging.reordering import (
    Arguments,
    capped,
    noise_floors,
    raise_floors,
)
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
    arguments, gradient_note = differentiable(fn, (tuple(args), dict(kwargs or {})), options)
    if options.intermediates and options.backend == "inductor" and probe_children is not None:
        probe_children.start(device_of([*args, *(kwargs or {}).values()]))
    unjudged_sizes: list[str] = []
    with full_fp32_precision(), aside():
        outcome = _check(
            fn, arguments, options, cache, probe_children, on_deviation, unjudged_sizes
        )
    outcome.fallback_random = any(graph.has_random_ops for graph in outcome.graphs)
    notes = (
        gradient_note,
        *unjudged_sizes,
        FALLBACK_RANDOM_NOTE if outcome.fallback_random else "",
    )
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
    graphs = compiled.entry.capture.graphs
    comparison = Comparison([])
    for index, ((arguments, eager_run, compiled_run), (reference, label)) in enumerate(
        zip(compiled.results, references, strict=True)
    ):
        comparison, rejudge = _compare_set(
            fn,
            arguments,
            eager_run,
            compiled_run,
            reference,
            eager,
            baseline,
            options,
            graphs,
            on_deviation,
            baseline.spread if index == 0 else None,
        )
        if not comparison.passed:
            where = f" at {describe(arguments)}" if len(sets) > 1 else ""
            message = comparison.structure_error or (
                f"{len(comparison.failing)} of {len(comparison.leaves)} outputs deviate beyond the "
                f"{'fp64 rule' if reference is not None else 'cosine check'}{where}"
            )
            if baseline.spread is not None:
                message += f"; {spread_note(baseline.spread)}, which was counted"
            return CheckOutcome(
                Status.FAIL_ACCURACY,
                message,
                comparison,
                label,
                graphs,
                failing_graphs(graphs, compiled.entry.capture.dynamo_graphs, options),
                compiled.seconds,
                recurs=recurs(compiled.entry, arguments, options, rejudge),
            )
    outcome = _passing_outcome(compiled, baseline, comparison, references[-1][1], options)
    spread = baseline.spread
    if spread is not None and outcome.status is Status.PASS:
        # Where deterministic kernels agree, eager's baseline is theirs: a pass; else the
        # verdict rests on eager's spread alone, and says so.
        outcome.status = Status.PASS if spread.settled else Status.EAGER_NONDETERMINISTIC
        outcome.message = f"{spread_note(spread)}: compiled code is within the spread of its runs"
    return outcome


def _compare_set(
    fn: Callable[..., Any],
    arguments: Arguments,
    eager_run: tuple[dict[str, Any], list[Any]],
    compiled_run: tuple[dict[str, Any], list[Any]],
    reference: dict[str, Any] | None,
    eager: EagerRuns,
    baseline: Baseline,
    options: CheckOptions,
    graphs: list[CapturedGraph],
    on_deviation: Callable[[str, str | None], None] | None,
    spread: Spread | None = None,
) -> tuple[Comparison, Callable[[tuple[dict[str, Any], list[Any]]], Comparison]]:
    """One input set's outputs judged; where they fail by the fp64 rule, judged again against the
    second legitimate evaluations' errors (run only then), which may overturn it: eager on the
    batch reversed and in channels-last layout, then, where outputs still fail, Inductor's
    decomposed graphs run eagerly (:func:`decomposed_floors`); and where eager disagrees with
    itself (``spread``), its second run. With the comparison, the same judgement of another
    compiled run (its masks and floors as found here)."""
    mutated = baseline.mutated
    floors: dict[str, float] = {}
    deciding: dict[str, str] = {}
    compared = (
        judged_results(*compiled_run, mutated),
        judged_results(*eager_run, mutated),
        reference,
        options,
        eager.unwritten(arguments, eager_run, mutated),
    )
    comparison = _compare(*compared)
    if not comparison.passed and any(leaf.path.startswith("grad") for leaf in comparison.failing):
        # Found only where a gradient fails: it costs two more eager forward and backward runs.
        through_nan = eager.nan_dependent_gradients(arguments, eager_run)
        if through_nan:
            compared = (*compared[:4], _either(compared[4], through_nan))
            comparison = _compare(*compared)
    if not comparison.passed and on_deviation is not None and graphs:
        on_deviation(
            graphs[0].config_source, device_of(list(arguments[0]) + list(arguments[1].values()))
        )
    if reference is not None and comparison.failing_by_fp64_rule:
        floors = evaluation_floors(
            fn, arguments, options, mutated, reference, eager.run, baseline.draws_random
        )
        for run in spread.runs if spread is not None else []:
            found = noise_floors(judged_results(*run, mutated), reference, reference, None)
            raise_floors(floors, deciding, found, EAGER_SPREAD_FLOOR)
        comparison = _compare(*compared, floors, deciding or None)
        if (
            comparison.failing_by_fp64_rule
            and options.backend == "inductor"
            and not baseline.draws_random
            and _capped_floors_could_pass(compared, reference, floors, comparison)
        ):
            decomposed = decomposed_floors(fn, arguments, options, mutated, reference, compared[1])
            if raise_floors(floors, deciding, decomposed, DECOMPOSED_FLOOR):
                comparison = _compare(*compared, floors, deciding)
    discontinuous: dict[str, float] = {}
    if not comparison.passed and reference is not None:
        # The output's conditioning: how far a rounding-sized change of the inputs and weights
        # moves it (a jump across a tie: max pooling, a ReLU's edge, a floor).
        comparison, discontinuous = conditioned(
            comparison,
            lambda floors, deciding: _compare(*compared, floors, deciding),
            lambda seed: judged_results(*eager.run(arguments, nudged=seed), mutated),
            reference,
            floors,
            deciding,
        )

    def rejudge(run: tuple[dict[str, Any], list[Any]]) -> Comparison:
        return judged_discontinuous(
            _compare(
                judged_results(*run, mutated), *compared[1:], floors or None, deciding or None
            ),
            discontinuous,
        )

    return comparison, rejudge


def _either(
    first: dict[str, torch.Tensor] | None, second: dict[str, torch.Tensor]
) -> dict[str, torch.Tensor]:
    """By leaf path, the elements that one set of masks or the other marks."""
    merged = dict(first or {})
    for path, mask in second.items():
        merged[path] = merged[path] | mask if path in merged else mask
    return merged


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
    if options.intermediates and options.backend == "inductor":
        with inductor_config(options.inductor_config):
            masked = masked_deviation(graphs, compiled.entry.probes, options)
        if masked is not None:
            graph, deviation = masked
            return CheckOutcome(
                Status.FAIL_ACCURACY,
                f"{graph.label}: {deviation.message}",
                dataclasses.replace(comparison, leaves=[*comparison.leaves, deviation.shown_leaf]),
                reference_label,
                graphs,
                [FailingGraph(graph, deviation.inputs, deviation.gm, deviation.note)],
                seconds,
            )
    judged = judged_results(baseline.parts, baseline.call_args, baseline.mutated)
    if not any(
        isinstance(leaf, torch.Tensor | float)
        for root in judged
        for _, leaf in flatten_outputs(judged[root], root)
    ):
        kinds = sorted(
            {
                type(leaf).__name__
                for root in judged
                for _, leaf in flatten_outputs(judged[root], root)
            }
        )
        return CheckOutcome(
            Status.NOT_JUDGED,
            f"nothing judged: the results hold no tensor (only {', '.join(kinds)})",
            comparison,
            reference_label,
            graphs,
            compile_seconds=seconds,
        )
    if inconclusive := comparison.inconclusive:
        return CheckOutcome(
            Status.INCONCLUSIVE,
            f"{len(inconclusive)} of {len(comparison.leaves)} outputs "
            f"inconclusive, {inconclusive[0].path}: {inconclusive[0].detail}",
            comparison,
            reference_label,
            graphs,
            compile_seconds=seconds,
        )
    status = Status.PASS if reference_label == "fp64" else Status.NO_FP64_REFERENCE
    return CheckOutcome(
        status,
        "",
        comparison,
        reference_label,
        graphs,
        compile_seconds=seconds,
    )


def _compare(
    compiled: dict[str, Any],
    eager: dict[str, Any],
    reference: dict[str, Any] | None,
    options: CheckOptions,
    unjudged: dict[str, torch.Tensor] | None = None,
    noise: dict[str, float] | None = None,
    noise_from: dict[str, str] | None = None,
) -> Comparison:
    leaves: list[LeafResult] = []
    for root, value in eager.items():
        part = compare_outputs(
            compiled[root],
            value,
            reference[root] if reference is not None else None,
            options.tolerance,
            not options.ignore_non_float,
            root=root,
            unjudged=unjudged,
            noise=noise,
            noise_from=noise_from,
        )
        if part.structure_error:
            return part
        leaves += part.leaves
    return Comparison(leaves)


def _capped_floors_could_pass(
    compared: tuple[
        dict[str, Any],
        dict[str, Any],
        dict[str, Any] | None,
        CheckOptions,
        dict[str, torch.Tensor] | None,
    ],
    reference: dict[str, Any],
    floors: dict[str, float],
    comparison: Comparison,
) -> bool:
    """Whether floors of at most ``DECOMPOSED_CAP`` times eager's error (what the decomposed
    graphs can give) could make an output that fails by the fp64 rule pass: where even the
    largest cannot, the decomposed graphs are not run (their compiles and runs cost a failing
    check seconds, and their verdict could only be the same)."""
    failing = comparison.failing_by_fp64_rule
    largest = capped(dict.fromkeys(failing, math.inf), compared[1], reference)
    ceiling = {
        **floors,
        **{path: max(floor, floors.get(path, 0.0)) for path, floor in largest.items()},
    }
    return any(leaf.passed for leaf in _compare(*compared, ceiling).leaves if leaf.path in failing)
