"""Reduce a failing graph to a 1-minimal graph that fails the same way.

A candidate keeps a subset of the graph's ops; every value it needs from outside is fed in as a
real input (the value the whole graph computed there, eagerly), so a candidate fails when the ops
it keeps miscompile, not because its inputs are made up. The search locates the culprit first:
for accuracy, one compile of the graph returning every floating intermediate, then a walk back
from the failing outputs along diverging values to where the deviation starts; for compile and
runtime errors, a bisection of topological prefixes. The culprit is tried alone, a window around
it is grown only when it does not fail alone (a fusion bug needs its ops together), delta
debugging is the fallback, and a last pass proves the result 1-minimal.
"""

from __future__ import annotations

import itertools
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import torch
import torch.fx

from pytest_torchcompile.common.kinds import FailureKind
from pytest_torchcompile.common.results import (
    Deviation,
    MinifyProgress,
    MinifyStep,
    StopReason,
)
from pytest_torchcompile.judging.case import ReproCase
from pytest_torchcompile.judging.judge import (
    GraphVerdict,
    error_signature,
    same_failure,
)
from pytest_torchcompile.judging.slicing import (
    ROOTS_TRIED_ALONE,
    GraphSlicer,
    Selection,
    output_index,
)
from pytest_torchcompile.judging.stages import op_name

GraphJudge = Callable[[torch.fx.GraphModule, list[Any]], GraphVerdict]
"""Compiles and judges one candidate graph on its inputs."""

LOCATE_BYTES_LIMIT = 1 << 30
"""Beyond this much floating intermediate data, the locate run (which returns all of it, three
times over with the references) is skipped for delta debugging."""


SPREAD_MIN_OPS = 20
"""A deviation that shows in at least this many ops, starting at none that fails alone or with
its neighbours (:data:`SPREAD_RADIUS`), is taken for accumulated rounding: the search stops
there instead of reducing a graph that fails only nearly whole."""

SPREAD_RADIUS = 2
"""How far around the first op where a deviation shows a failing window is looked for before
the deviation is called spread (a fusion bug fails with its ops within a step or two)."""


@dataclass
class Reduction:
    """What :func:`minify_graph` made of a case; ``gm`` is None when no failing graph was found."""

    gm: torch.fx.GraphModule | None
    inputs: list[Any]
    ops_before: int
    ops_after: int
    compiles: int
    seconds: float
    stop: StopReason
    how: str
    verdict: GraphVerdict | None = None
    """How the graph left fails (what a bug report shows of it)."""
    needs: str = ""
    """For a minimal graph of several ops: what it did without each one (why each is needed)."""
    deviation: list[Deviation] = field(default_factory=list)
    """The locate run's verdict on every floating intermediate, in graph order."""
    trajectory: list[MinifyStep] = field(default_factory=list)


# --- the search --------------------------------------------------------------------------------


class _OutOfTime(Exception):
    pass


class _Spread(Exception):
    """The deviation is spread over the graph (:data:`SPREAD_MIN_OPS`); the message says how."""


class _Search:
    """Judges selections (once each) and remembers the smallest one that fails."""

    def __init__(
        self,
        case: ReproCase,
        slicer: GraphSlicer,
        judge: GraphJudge,
        budget_s: float,
        progress: Callable[[MinifyProgress], None] | None,
    ) -> None:
        self.case = case
        self.slicer = slicer
        self.judge = judge
        self.budget_s = budget_s
        self.progress = progress
        self.started = time.perf_counter()
        self.compiles = 0
        self.verdicts: dict[Selection, GraphVerdict] = {}
        self.smallest_failing: Selection | None = None
        self.everything: Selection = frozenset(slicer.order)
        self.trajectory: list[MinifyStep] = []
        self.deviation: list[Deviation] = []

    def elapsed(self) -> float:
        return time.perf_counter() - self.started

    def is_failure(self, verdict: GraphVerdict) -> bool:
        return same_failure(
            verdict, self.case.kind, self.case.expected_error, self.case.error_pattern
        )

    def fails(self, selection: Selection) -> bool:
        if not selection:
            return False
        if selection not in self.verdicts:
            # The budget counts once a failing graph is known, so that it can be returned.
            if self.smallest_failing is not None and self.elapsed() > self.budget_s:
                raise _OutOfTime
            self.record(selection, self.judge_graph(*self.slicer.slice(selection)))
        return self.is_failure(self.verdicts[selection])

    def judge_graph(self, gm: torch.fx.GraphModule, inputs: list[Any]) -> GraphVerdict:
        verdict = self.judge(gm, inputs)
        self.compiles += 1
        return verdict

    def record(self, selection: Selection, verdict: GraphVerdict) -> None:
        self.verdicts[selection] = verdict
        ops = self.slicer.op_count
        if self.is_failure(verdict) and (
            self.smallest_failing is None or ops(selection) < ops(self.smallest_failing)
        ):
            self.smallest_failing = selection
        self.report()

    def report(self) -> None:
        left = self.smallest_failing if self.smallest_failing is not None else self.everything
        step = MinifyStep(self.elapsed(), self.slicer.op_count(left), self.compiles)
        self.trajectory.append(step)
        if self.progress is not None:
            self.progress(
                MinifyProgress(self.case.title, step.ops_left, step.compiles, step.seconds)
            )

    def reduction(self, selection: Selection | None, stop: StopReason, how: str) -> Reduction:
        gm, inputs = self.slicer.slice(selection) if selection is not None else (None, [])
        ops_before = self.case.op_count
        return Reduction(
            gm,
            inputs,
            ops_before,
            self.slicer.op_count(selection) if selection is not None else ops_before,
            self.compiles,
            self.elapsed(),
            stop,
            how,
            self.verdicts.get(selection) if selection is not None else None,
            deviation=self.deviation,
            trajectory=self.trajectory,
        )


def minify_graph(
    case: ReproCase,
    judge: GraphJudge,
    *,
    budget_s: float = 300.0,
    progress: Callable[[MinifyProgress], None] | None = None,
) -> Reduction:
    """Reduce ``case.gm`` to a 1-minimal graph that ``judge`` finds failing as ``case`` records.

    Once a failing graph is known, ``budget_s`` bounds the search; when it runs out, the
    smallest failing graph found so far comes back, stopped by the time budget.
    """
    try:
        slicer = GraphSlicer(case.gm, case.inputs)
    except Exception as error:
        return Reduction(
            None,
            [],
            case.op_count,
            case.op_count,
            0,
            0.0,
            StopReason.REPRO_BROKEN,
            f"the graph fails when run eagerly on its inputs ({error_signature(error)})",
        )
    search = _Search(case, slicer, judge, budget_s, progress)
    if not search.everything:
        return search.reduction(
            None, StopReason.NOT_REPRODUCED, "the graph holds no op for the compiler to get wrong"
        )
    try:
        failing, how = _failing_core(search)
        if failing is None:
            return search.reduction(None, *_why_not_reproduced(search.verdicts[search.everything]))
        minimal = _one_minimal(search, _ddmin(search, failing))
    except _OutOfTime:
        return search.reduction(
            search.smallest_failing,
            StopReason.TIME_BUDGET,
            f"time budget of {budget_s:.0f} s ran out",
        )
    except _Spread as spread:
        return search.reduction(None, StopReason.SPREAD, str(spread))
    return replace(
        search.reduction(minimal, StopReason.MINIMAL, how),
        needs=_why_each_op_stays(search, minimal),
    )


def _failing_core(search: _Search) -> tuple[Selection | None, str]:
    """A small failing selection to reduce further, and how it was found; None when the whole
    graph does not fail as recorded."""
    roots, deviating = (
        _locate_deviation(search) if search.case.kind == FailureKind.ACCURACY else ([], 0)
    )
    if not search.fails(search.everything):
        return None, "the whole graph does not fail as recorded"
    universe = search.everything
    locating = "one compile of every intermediate located where the deviation starts"
    if not roots and search.case.kind != FailureKind.ACCURACY:
        universe = _bisect_prefixes(search)
        roots, locating = (
            search.slicer.ordered(universe)[-1:],
            "bisecting topological prefixes found the culprit",
        )
    for root in roots[:ROOTS_TRIED_ALONE]:
        if search.fails(frozenset({root})):
            return frozenset({root}), f"{locating} ({root}); it fails alone"
    _refuse_spread(search, roots, deviating, universe)
    window = _grow_window(search, roots[0], universe) if roots else None
    if window is not None:
        return window, (
            f"{locating} ({roots[0]}); it fails only together with its neighbours "
            f"({search.slicer.op_count(window)} ops)"
        )
    return universe, "delta debugging (no single culprit was located)"


def _refuse_spread(search: _Search, roots: list[str], deviating: int, universe: Selection) -> None:
    """:class:`_Spread` where the deviation shows in at least :data:`SPREAD_MIN_OPS` ops and
    where it first shows fails neither alone nor within :data:`SPREAD_RADIUS` of its neighbours."""
    if not roots or deviating < SPREAD_MIN_OPS:
        return
    if _grow_window(search, roots[0], universe, SPREAD_RADIUS) is not None:
        return
    raise _Spread(
        f"spread over {deviating} ops, consistent with accumulated rounding (where it first shows, "
        f"{', '.join(roots[:ROOTS_TRIED_ALONE])}, fails neither alone nor with its neighbours)"
    )


def _why_not_reproduced(verdict: GraphVerdict) -> tuple[StopReason, str]:
    """Why the whole graph does not fail as recorded: it passes, fails another way, cannot run
    eagerly (the repro is broken), or takes the judging process down."""
    error = f": {verdict.error}" if verdict.error else ""
    if verdict.failure is None:
        return StopReason.NOT_REPRODUCED, "the compiled graph matches the reference now"
    if verdict.failure == FailureKind.EAGER_ERROR:
        return StopReason.REPRO_BROKEN, f"the graph fails when run eagerly on its inputs{error}"
    if verdict.failure in (FailureKind.CRASHED, FailureKind.TIMED_OUT, FailureKind.JUDGE_ERROR):
        return (
            StopReason.CRASHED,
            f"judging the whole graph {verdict.failure.replace('_', ' ')}{error}",
        )
    return StopReason.NOT_REPRODUCED, f"it fails differently now ({verdict.failure}{error})"


def _locate_deviation(search: _Search) -> tuple[list[str], int]:
    """Units where a deviation starts, earliest first, from one compile of the whole graph
    returning every floating intermediate and every exact one computed from exact values
    (:meth:`GraphSlicer.located_nodes`), each judged against its own fp64 value by the oracle
    rule; and how many units deviate. That run doubles as the reproduction check when an
    original output fails."""
    slicer = search.slicer
    probe, probe_inputs, observed = slicer.probe(slicer.located_nodes())
    if not observed or sum(slicer.values[node].nbytes for node in observed) > LOCATE_BYTES_LIMIT:
        return [], 0
    verdict = search.judge_graph(probe, probe_inputs)
    diverged = _diverged(observed, verdict)
    failing_outputs = diverged & slicer.outputs
    if verdict.failure == FailureKind.ACCURACY and failing_outputs:
        search.record(search.everything, verdict)
    else:
        search.report()
    if verdict.failure is None:
        # Every value within the rule once returned: the deviation arises only inside a kernel
        # that fuses them, which returning its values splits. The page says so from these points.
        search.deviation = _deviation(slicer, observed, verdict, set())
    if verdict.failure != FailureKind.ACCURACY:
        return [], 0
    roots = slicer.deviation_roots(diverged, failing_outputs)
    search.deviation = _deviation(slicer, observed, verdict, set(roots))
    return roots, len({slicer.unit_of[node] for node in diverged})


def _diverged(observed: list[torch.fx.Node], verdict: GraphVerdict) -> set[torch.fx.Node]:
    """The observed values the locate run's verdict fails."""
    # A torch-level graph in a training call also returns its gradients: those follow the outputs,
    # and the inputs the graph writes into follow them.
    return {
        observed[index]
        for leaf in verdict.leaves
        if not leaf.passed
        and (index := output_index(leaf.path)) is not None
        and index < len(observed)
    }


def _deviation(
    slicer: GraphSlicer, observed: list[torch.fx.Node], verdict: GraphVerdict, roots: set[str]
) -> list[Deviation]:
    """The locate run's verdict on each observed value, in graph order; a deviating value of a
    unit where a deviation starts is marked so. An exact value that differs has no rmse ratio:
    its eager error is nil, so its ratio is infinite."""
    by_index = {
        index: leaf
        for leaf in verdict.leaves
        if (index := output_index(leaf.path)) is not None and index < len(observed)
    }
    floating = set(slicer.observed_nodes())
    return [
        Deviation(
            node.name,
            op_name(node.target),
            math.inf
            if leaf.ratio is None and not leaf.passed and node not in floating
            else leaf.ratio,
            leaf.passed,
            not leaf.passed and slicer.unit_of[node] in roots,
        )
        for index, node in enumerate(observed)
        if (leaf := by_index.get(index)) is not None
    ]


def _bisect_prefixes(search: _Search) -> Selection:
    """The shortest failing topological prefix, in log2(n) compiles; its last unit is the culprit."""
    order = search.slicer.order
    passing, failing = 0, len(order)
    while failing - passing > 1:
        middle = (passing + failing) // 2
        if search.fails(frozenset(order[:middle])):
            failing = middle
        else:
            passing = middle
    return frozenset(order[:failing])


def _grow_window(
    search: _Search, centre: str, universe: Selection, max_radius: int | None = None
) -> Selection | None:
    """The first failing neighbourhood of ``centre`` at radius 1, 2, 4, ... (up to ``max_radius``);
    None once it would be all of ``universe``, or past ``max_radius``."""
    radius = 1
    window = frozenset({centre})
    while max_radius is None or radius <= max_radius:
        wider = search.slicer.neighbourhood(centre, radius, universe)
        if wider in (window, universe):
            return None
        if search.fails(wider):
            return wider
        window, radius = wider, radius * 2
    return None


def _ddmin(search: _Search, selection: Selection) -> Selection:
    """Zeller's delta debugging over topologically contiguous chunks of units."""
    units = search.slicer.ordered(selection)
    granularity = 2
    while len(units) >= 2:
        reduced = _ddmin_step(search, units, granularity)
        if reduced is not None:
            units, granularity = reduced
            continue
        if granularity >= len(units):
            break
        granularity = min(len(units), granularity * 2)
    return frozenset(units)


def _ddmin_step(
    search: _Search, units: list[str], granularity: int
) -> tuple[list[str], int] | None:
    """One reduction of delta debugging: a chunk of ``units`` that fails (searched on from
    granularity 2), else the rest without one chunk that fails (searched on with one chunk
    fewer); None where none fails."""
    chunks = _chunks(units, granularity)
    subset = next((chunk for chunk in chunks if search.fails(frozenset(chunk))), None)
    if subset is not None:
        return subset, 2
    if granularity <= 2:
        return None  # the complements of two chunks are the chunks
    for chunk in chunks:
        rest = [unit for unit in units if unit not in chunk]
        if search.fails(frozenset(rest)):
            return rest, max(granularity - 1, 2)
    return None


def _chunks(units: list[str], count: int) -> list[list[str]]:
    size, extra = divmod(len(units), count)
    bounds = [index * size + min(index, extra) for index in range(count + 1)]
    return [units[start:end] for start, end in itertools.pairwise(bounds) if end > start]


def _one_minimal(search: _Search, selection: Selection) -> Selection:
    """Drop single units while the rest still fails: at the end no single one can go."""
    current = selection
    while True:
        smaller = next(
            (
                current - {unit}
                for unit in search.slicer.ordered(current)
                if search.fails(current - {unit})
            ),
            None,
        )
        if smaller is None:
            return current
        current = smaller


def _why_each_op_stays(search: _Search, minimal: Selection) -> str:
    """What a 1-minimal graph of several units did without each one, its value fed in as an input
    instead (its last pass judged each such graph): why each is needed; "" for a single unit."""
    if len(minimal) < 2:
        return ""
    reasons = []
    for unit in search.slicer.ordered(minimal):
        verdict = search.verdicts.get(minimal - {unit})
        if verdict is None:
            continue
        outcome = (
            "passes"
            if verdict.failure is None
            else f"fails otherwise ({verdict.failure}"
            + (f": {_shortened(verdict.error)}" if verdict.error else "")
            + ")"
        )
        node = search.slicer.units[unit][0]
        reasons.append(f"without {op_name(node.target)} ({unit}) it {outcome}")
    return "each op is needed, its value fed in instead: " + "; ".join(reasons) if reasons else ""


def _shortened(text: str, limit: int = 100) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."
