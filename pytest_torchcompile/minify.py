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

import functools
import itertools
import json
import operator
import os
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import torch
import torch.fx

from . import _torch_compat
from .capture import OP_NODES
from .files import atomic_write, locked
from .isolation import (
    CRASHED,
    JUDGE_ERROR,
    TIMED_OUT,
    InProcessJudge,
    IsolatedJudge,
    IsolationError,
    JudgeSettings,
    StageQuery,
    config_patches,
)
from .repro import ReproCase, _config_lines, load_repro, write_repro
from .results import MinifyProgress, MinifyResult, StopReason
from .stages import FailureKind, StageAttribution, graph_ops
from .standalone import (
    ACCURACY,
    COMPILE_ERROR,
    DYNAMO,
    EAGER_ERROR,
    RUNTIME_ERROR,
    GraphVerdict,
    ReproBroken,
    clone_values,
    error_signature,
    same_failure,
)

Judge = Callable[[torch.fx.GraphModule, list[Any]], GraphVerdict]
"""Compiles and judges one candidate graph on its inputs."""

Selection = frozenset[str]
"""A candidate: the names of the units (see :class:`GraphSlicer`) it keeps."""

MINIFIED_NAME = "minified.py"

LOCATE_BYTES_LIMIT = 1 << 30
"""Beyond this much floating intermediate data, the locate run (which returns all of it, three
times over with the references) is skipped for delta debugging."""

ROOTS_TRIED_ALONE = 3
"""How many places where a deviation starts are tried as one-op candidates."""

ATTRIBUTABLE = (ACCURACY, COMPILE_ERROR, RUNTIME_ERROR)
"""Failures whose stage is looked for: a case recorded as a crash of the judging process would
crash it again at every stage."""

FRESH_PROCESS_GRACE_S = 120.0
"""Beyond its time budget, how long a minifying process may take to start and write its files."""


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


# --- cutting candidates out of a graph ---------------------------------------------------------


class _RecordingInterpreter(torch.fx.Interpreter):
    def __init__(self, gm: torch.fx.GraphModule) -> None:
        super().__init__(gm)
        self.values: dict[torch.fx.Node, Any] = {}

    def run_node(self, n: torch.fx.Node) -> Any:
        self.values[n] = result = super().run_node(n)
        return result


class GraphSlicer:
    """Cuts candidate graphs out of one graph, feeding every cut edge with its real value.

    The unit of reduction is an op together with the ``getitem`` nodes unpacking its tuple result
    (a tuple cannot be fed in or returned on its own). Units are named after their op node.
    """

    def __init__(self, gm: torch.fx.GraphModule, inputs: Sequence[Any] | None) -> None:
        """``inputs`` None: the values are the fake ones Inductor's graphs are traced with (node
        metadata), enough to build a probe (:meth:`probe`) before any input exists, not to feed a
        cut."""
        self.gm = gm
        nodes = list(gm.graph.nodes)
        self._position = {node: index for index, node in enumerate(nodes)}
        self.units: dict[str, list[torch.fx.Node]] = {}
        self.unit_of: dict[torch.fx.Node, str] = {}
        for node in nodes:
            if node.op not in OP_NODES:
                continue
            source = node.args[0] if node.args else None
            unpacks = node.target is operator.getitem and isinstance(source, torch.fx.Node) and source in self.unit_of
            unit = self.unit_of[source] if unpacks else node.name  # type: ignore[index]
            self.units.setdefault(unit, []).append(node)
            self.unit_of[node] = unit
        self.order = list(self.units)
        self._rank = {unit: index for index, unit in enumerate(self.order)}
        self.outputs = {node for node in nodes if node.op == "output" for node in node.all_input_nodes}
        self.producers = {
            unit: {self.unit_of[arg] for node in members for arg in node.all_input_nodes
                   if arg in self.unit_of and self.unit_of[arg] != unit}
            for unit, members in self.units.items()
        }
        self.consumers: dict[str, set[str]] = {unit: set() for unit in self.units}
        for unit, producers in self.producers.items():
            for producer in producers:
                self.consumers[producer].add(unit)
        self.values = self._eager_values(inputs) if inputs is not None else {node: node.meta.get("val") for node in nodes}

    def _eager_values(self, inputs: Sequence[Any]) -> dict[torch.fx.Node, Any]:
        interpreter = _RecordingInterpreter(self.gm)
        with torch.no_grad():
            interpreter.run(*clone_values(inputs))
        values = interpreter.values
        placeholders = [node for node in self.gm.graph.nodes if node.op == "placeholder"]
        # The inputs as given, not as the run may have left them (graphs can mutate inputs).
        values.update(zip(placeholders, inputs, strict=True))
        return values

    def ordered(self, selection: Selection) -> list[str]:
        return sorted(selection, key=self._rank.__getitem__)

    def op_count(self, selection: Selection) -> int:
        return sum(len(self.units[unit]) for unit in selection)

    def observed_nodes(self) -> list[torch.fx.Node]:
        """The floating values a probe judges: all but the views that only rearrange all of
        another value's elements (judged, they would repeat their base's verdict; returned, each
        costs the compile an output), which are observed only as outputs of the graph."""
        return [node for node in self.unit_of if _is_floating(self.values.get(node))
                and (node in self.outputs or node not in self._view_bases)]

    def probe(self) -> tuple[torch.fx.GraphModule, list[Any], list[torch.fx.Node]]:
        """The whole graph returning every observed value (:meth:`observed_nodes`), its inputs,
        and those values in the order it returns them."""
        observed = self.observed_nodes()
        gm, inputs = self.slice(frozenset(self.order), outputs=observed)
        return gm, inputs, observed

    def with_views(self, diverged: set[torch.fx.Node]) -> set[torch.fx.Node]:
        """``diverged`` and the unobserved views of its values, which deviate with their base."""
        spread = set(diverged)
        for view, base in self._view_bases.items():
            if base in spread:
                spread.add(view)
        return spread

    @functools.cached_property
    def _view_bases(self) -> dict[torch.fx.Node, torch.fx.Node]:
        """Each view that rearranges all of another value's elements in the same dtype (a permute,
        a reshape, a squeeze), in graph order, with that value."""
        bases: dict[torch.fx.Node, torch.fx.Node] = {}
        for node in self.unit_of:
            base = node.args[0] if node.args else None
            if not isinstance(base, torch.fx.Node) or not _torch_compat.is_view_op(node.target) \
                    or node.target is torch.ops.aten.as_strided.default:
                continue
            value, base_value = self.values.get(node), self.values.get(base)
            if isinstance(value, torch.Tensor) and isinstance(base_value, torch.Tensor) \
                    and value.dtype == base_value.dtype and value.numel() == base_value.numel():
                bases[node] = base
        return bases

    def neighbourhood(self, centre: str, radius: int, within: Selection) -> Selection:
        """Units at most ``radius`` producer/consumer steps from ``centre``, inside ``within``."""
        reached = {centre}
        frontier = {centre}
        for _ in range(radius):
            frontier = {near for unit in frontier for near in self.producers[unit] | self.consumers[unit]
                        if near in within} - reached
            reached |= frontier
        return frozenset(reached)

    def divergence_roots(self, diverged: set[torch.fx.Node], failing_outputs: set[torch.fx.Node]) -> list[str]:
        """Units where a deviation starts, earliest first.

        Walks back from the failing outputs (every diverging value when none is an output) along
        diverging values only: a deviation that reaches the outputs only through a bool mask is
        not followed. The units reached that no diverging unit feeds are where deviations start.
        Views left unobserved (:meth:`observed_nodes`) deviate with their base.
        """
        diverged = self.with_views(diverged)
        bad = {self.unit_of[node] for node in diverged}
        pending = [self.unit_of[node] for node in (failing_outputs or diverged)]
        reached: set[str] = set()
        while pending:
            unit = pending.pop()
            if unit not in reached:
                reached.add(unit)
                pending.extend(self.producers[unit] & bad)
        return [unit for unit in self.order if unit in reached and not self.producers[unit] & bad]

    def slice(
        self, selection: Selection, outputs: Sequence[torch.fx.Node] | None = None,
    ) -> tuple[torch.fx.GraphModule, list[Any]]:
        """The candidate keeping ``selection``: values from outside become inputs holding their
        real values, constants stay constants, and it returns what ``selection`` computes that
        nothing in it consumes, plus original outputs (or exactly ``outputs``)."""
        kept = sorted((node for unit in selection for node in self.units[unit]), key=self._position.__getitem__)
        kept_set = set(kept)
        boundary = sorted({arg for node in kept for arg in node.all_input_nodes if arg not in kept_set},
                          key=self._position.__getitem__)
        graph = torch.fx.Graph()
        env: dict[torch.fx.Node, Any] = {}
        inputs: list[Any] = []
        for node in boundary:
            value = self.values[node]
            if node.op == "get_attr":
                continue
            if isinstance(value, torch.Tensor):
                env[node] = graph.placeholder(node.name)
                # A copy, so that the candidate carries neither the aliasing nor the storage
                # of a view it was cut from.
                inputs.append(value if node.op == "placeholder" else value.detach().clone())
            else:
                env[node] = value
        for node in boundary:
            if node.op == "get_attr":
                env[node] = graph.get_attr(str(node.target))
        for node in kept:
            env[node] = graph.node_copy(node, env.__getitem__)
            # Metadata of the original trace (fake tensors) would not match the new inputs.
            env[node].meta = {}
        if outputs is None:
            outputs = [node for node in kept if isinstance(self.values.get(node), torch.Tensor)
                       and (node in self.outputs or not any(user in kept_set for user in node.users))]
        graph.output(tuple(env[node] for node in outputs))
        return torch.fx.GraphModule(self.gm, graph), inputs


def _is_floating(value: Any) -> bool:
    return isinstance(value, torch.Tensor) and value.is_floating_point() and value.numel() > 0


# --- the search --------------------------------------------------------------------------------


class _OutOfTime(Exception):
    pass


class _Search:
    """Judges selections (once each) and remembers the smallest one that fails."""

    def __init__(
        self, case: ReproCase, slicer: GraphSlicer, judge: Judge, budget_s: float,
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

    def elapsed(self) -> float:
        return time.perf_counter() - self.started

    def is_failure(self, verdict: GraphVerdict) -> bool:
        return same_failure(verdict, self.case.kind, self.case.expected_error, self.case.error_pattern)

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
        if self.is_failure(verdict) and (self.smallest_failing is None or ops(selection) < ops(self.smallest_failing)):
            self.smallest_failing = selection
        self.report()

    def report(self) -> None:
        if self.progress is not None:
            left = self.smallest_failing if self.smallest_failing is not None else self.everything
            self.progress(MinifyProgress(self.case.title, self.slicer.op_count(left), self.compiles, self.elapsed()))

    def reduction(self, selection: Selection | None, stop: StopReason, how: str) -> Reduction:
        gm, inputs = self.slicer.slice(selection) if selection is not None else (None, [])
        ops_before = self.case.op_count
        return Reduction(
            gm, inputs, ops_before, self.slicer.op_count(selection) if selection is not None else ops_before,
            self.compiles, self.elapsed(), stop, how,
        )


def minify_graph(
    case: ReproCase,
    judge: Judge,
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
        return Reduction(None, [], case.op_count, case.op_count, 0, 0.0, StopReason.REPRO_BROKEN,
                         f"the graph fails when run eagerly on its inputs ({error_signature(error)})")
    search = _Search(case, slicer, judge, budget_s, progress)
    try:
        failing, how = _failing_core(search)
        if failing is None:
            return search.reduction(None, *_why_not_reproduced(search.verdicts[search.everything]))
        minimal = _one_minimal(search, _ddmin(search, failing))
    except _OutOfTime:
        return search.reduction(search.smallest_failing, StopReason.TIME_BUDGET,
                                f"time budget of {budget_s:.0f} s ran out")
    return search.reduction(minimal, StopReason.MINIMAL, how)


def _failing_core(search: _Search) -> tuple[Selection | None, str]:
    """A small failing selection to reduce further, and how it was found; None when the whole
    graph does not fail as recorded."""
    roots = _locate_divergence(search) if search.case.kind == ACCURACY else []
    if not search.fails(search.everything):
        return None, "the whole graph does not fail as recorded"
    universe = search.everything
    locating = "one compile of every floating intermediate located where the deviation starts"
    if not roots and search.case.kind != ACCURACY:
        universe = _bisect_prefixes(search)
        roots, locating = search.slicer.ordered(universe)[-1:], "bisecting topological prefixes found the culprit"
    for root in roots[:ROOTS_TRIED_ALONE]:
        if search.fails(frozenset({root})):
            return frozenset({root}), f"{locating} ({root}); it fails alone"
    window = _grow_window(search, roots[0], universe) if roots else None
    if window is not None:
        return window, (f"{locating} ({roots[0]}); it fails only together with its neighbours "
                        f"({search.slicer.op_count(window)} ops)")
    return universe, "delta debugging (no single culprit was located)"


def _why_not_reproduced(verdict: GraphVerdict) -> tuple[StopReason, str]:
    """Why the whole graph does not fail as recorded: it passes, fails another way, cannot run
    eagerly (the repro is broken), or takes the judging process down."""
    error = f": {verdict.error}" if verdict.error else ""
    if verdict.failure is None:
        return StopReason.NOT_REPRODUCED, "the compiled graph matches the reference now"
    if verdict.failure == EAGER_ERROR:
        return StopReason.REPRO_BROKEN, f"the graph fails when run eagerly on its inputs{error}"
    if verdict.failure in (CRASHED, TIMED_OUT, JUDGE_ERROR):
        return StopReason.CRASHED, f"judging the whole graph {verdict.failure.replace('_', ' ')}{error}"
    return StopReason.NOT_REPRODUCED, f"it fails differently now ({verdict.failure}{error})"


def _locate_divergence(search: _Search) -> list[str]:
    """Units where a floating deviation starts, earliest first, from one compile of the whole
    graph returning every floating intermediate, each judged against its own fp64 value by the
    oracle rule. That run doubles as the reproduction check when an original output fails."""
    slicer = search.slicer
    probe, probe_inputs, observed = slicer.probe()
    if not observed or sum(slicer.values[node].nbytes for node in observed) > LOCATE_BYTES_LIMIT:
        return []
    verdict = search.judge_graph(probe, probe_inputs)
    # A torch-level graph in a training call also returns its gradients: those follow the outputs.
    diverged = {observed[index] for leaf in verdict.leaves
                if not leaf.passed and (index := output_index(leaf.path)) < len(observed)}
    failing_outputs = diverged & slicer.outputs
    if verdict.failure == ACCURACY and failing_outputs:
        search.record(search.everything, verdict)
    else:
        search.report()
    return slicer.divergence_roots(diverged, failing_outputs) if verdict.failure == ACCURACY else []


def output_index(path: str) -> int:
    """The output position in a leaf path of ``judge_graph`` (``graph_out[3]``)."""
    match = re.fullmatch(r"graph_out\[(\d+)\]", path)
    if match is None:
        raise ValueError(f"unexpected output path {path!r}")
    return int(match.group(1))


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


def _grow_window(search: _Search, centre: str, universe: Selection) -> Selection | None:
    """The first failing neighbourhood of ``centre`` at radius 1, 2, 4, ...; None once it would
    be all of ``universe``."""
    radius = 1
    window = frozenset({centre})
    while True:
        wider = search.slicer.neighbourhood(centre, radius, universe)
        if wider in (window, universe):
            return None
        if search.fails(wider):
            return wider
        window, radius = wider, radius * 2


def _ddmin(search: _Search, selection: Selection) -> Selection:
    """Zeller's delta debugging over topologically contiguous chunks of units."""
    units = search.slicer.ordered(selection)
    granularity = 2
    while len(units) >= 2:
        chunks = _chunks(units, granularity)
        subset = next((chunk for chunk in chunks if search.fails(frozenset(chunk))), None)
        if subset is not None:
            units, granularity = subset, 2
            continue
        complements = [[unit for unit in units if unit not in chunk] for chunk in chunks] if granularity > 2 else []
        complement = next((rest for rest in complements if search.fails(frozenset(rest))), None)
        if complement is not None:
            units, granularity = complement, max(granularity - 1, 2)
            continue
        if granularity >= len(units):
            break
        granularity = min(len(units), granularity * 2)
    return frozenset(units)


def _chunks(units: list[str], count: int) -> list[list[str]]:
    size, extra = divmod(len(units), count)
    bounds = [index * size + min(index, extra) for index in range(count + 1)]
    return [units[start:end] for start, end in itertools.pairwise(bounds) if end > start]


def _one_minimal(search: _Search, selection: Selection) -> Selection:
    """Drop single units while the rest still fails: at the end no single one can go."""
    current = selection
    while True:
        smaller = next((current - {unit} for unit in search.slicer.ordered(current)
                        if search.fails(current - {unit})), None)
        if smaller is None:
            return current
        current = smaller


# --- repro files -------------------------------------------------------------------------------


def minify_repro(
    repro_path: Path,
    *,
    timeout_s: float = 300.0,
    progress: Callable[[MinifyProgress], None] | None = None,
    isolate: bool = True,
    device: str | None = None,
    find_stage: bool = True,
) -> MinifyResult:
    """Minify the case of a repro file; write ``minified.py`` and the generated kernel beside it.

    Candidates are judged in a warm child process (``isolate``) on ``device`` ("cuda:N"), so that
    a crashing or hanging candidate cannot take this process down. ``repro.py`` is only read,
    and every file written is replaced atomically: nothing is lost if the minifier dies. With
    ``find_stage``, the stage of the stack that introduces the failure is looked for too (see
    ``stages``), in the same child.
    """
    started = time.perf_counter()
    path = Path(repro_path).resolve()
    config_source = _config_lines(path)
    judging = (IsolatedJudge(config_source, device=device, candidate_timeout_s=timeout_s)
               if isolate else InProcessJudge(config_source))
    with judging as judge:
        try:
            case = load_case(path)
        except ReproBroken as error:
            return MinifyResult(0, 0, time.perf_counter() - started, 0, StopReason.REPRO_BROKEN, note=str(error))
        query = stage_query(case)
        settings = query.settings
        try:
            reduction = minify_graph(
                case, functools.partial(judge, settings=settings),
                budget_s=timeout_s - (time.perf_counter() - started), progress=progress,
            )
            kernel = (judge.kernel_source(reduction.gm, reduction.inputs, settings)
                      if reduction.gm is not None else None)
            seconds = time.perf_counter() - started
            stage = (judge.attribute_stage(reduction.gm, reduction.inputs, query)
                     if reduction.gm is not None and find_stage and case.kind in ATTRIBUTABLE else None)
        except IsolationError as error:
            return MinifyResult(case.op_count, case.op_count, time.perf_counter() - started, 0,
                                StopReason.CRASHED, note=str(error))
    if reduction.gm is None:
        return MinifyResult(reduction.ops_before, reduction.ops_after, seconds,
                            reduction.compiles, reduction.stop, note=reduction.how)
    compiles = reduction.compiles + 1  # the kernel's
    note = _note(reduction, compiles, seconds)
    # A torch-level graph's comment shows the post-AOT graphs it lowers to, not a kernel file.
    if case.level == DYNAMO:
        generated, comment = None, kernel or ""
    else:
        generated = _generated_code(kernel)
        comment = generated[0] if generated else ""
    minified = write_repro(_minified_case(case, reduction, note, comment, stage), path.with_name(MINIFIED_NAME))
    kernel_path = _write_kernel(generated, path.parent)
    result = MinifyResult(
        reduction.ops_before, reduction.ops_after, seconds, compiles,
        reduction.stop, str(minified), str(kernel_path) if kernel_path else None, note,
        graph_ops(reduction.gm), failure_type=query.failure.type_name,
    )
    if stage is not None:
        result.stage, result.stage_summary = stage.stage, stage.summary
        result.stage_compiles, result.stage_seconds = stage.compiles, time.perf_counter() - started - seconds
    return result


def stage_query(case: ReproCase) -> StageQuery:
    """How the stage of a case's failure is looked for: judged as its candidates are."""
    return StageQuery(JudgeSettings.for_minifying(case), FailureKind(case.kind, case.expected_error, case.error_pattern))


def minify_in_fresh_process(
    repro_path: Path,
    *,
    timeout_s: float = 300.0,
    progress: Callable[[MinifyProgress], None] | None = None,
    isolate: bool = True,
    device: str | None = None,
) -> MinifyResult:
    """:func:`minify_repro` run by ``python -m pytest_torchcompile`` in a new process, for a
    process whose device a device-side error has made unusable: the reducer itself runs the
    graph eagerly to feed its candidates. ``progress`` is not reported across processes."""
    with tempfile.TemporaryDirectory(prefix="pytest-torchcompile-") as scratch:
        result_path = Path(scratch) / "result.json"
        command = [sys.executable, "-m", "pytest_torchcompile", "minify", str(repro_path),
                   "--timeout", str(timeout_s), "--result-json", str(result_path)]
        command += [] if isolate else ["--no-isolate"]
        command += ["--device", device] if device is not None else []
        run = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s + FRESH_PROCESS_GRACE_S)
        if not result_path.is_file():
            tail = (run.stdout + run.stderr).strip().splitlines()[-3:]
            raise RuntimeError(f"the minifying process exited {run.returncode}: {' | '.join(tail)}")
        return MinifyResult(**json.loads(result_path.read_text()))


def load_case(path: str | os.PathLike[str]) -> ReproCase:
    """The case of a repro file, loaded without leaking its Inductor config into this process:
    ``load_repro`` runs the file's config lines, and this patch undoes them afterwards. Raises
    :class:`ReproBroken` when the file cannot run."""
    with _torch_compat.inductor_config(config_patches(_config_lines(Path(path)))):
        return load_repro(path).case


def repro_defect(path: str | os.PathLike[str]) -> str | None:
    """Why a just-written repro file cannot run (it does not load, or its graph fails eagerly
    on its inputs), or None. Cheap: nothing is compiled."""
    try:
        case = load_case(path)
        with torch.no_grad():
            case.gm(*clone_values(case.inputs))
    except Exception as error:
        if _out_of_memory(error):
            return None  # a second copy of a large case does not fit beside the test's: no verdict
        if isinstance(error, ReproBroken):
            return str(error)
        return f"the graph fails when run eagerly on its inputs: {error_signature(error)}"
    return None


def _out_of_memory(error: BaseException | None) -> bool:
    while error is not None:
        if isinstance(error, torch.OutOfMemoryError):
            return True
        error = error.__cause__
    return False


def _note(reduction: Reduction, compiles: int, seconds: float) -> str:
    summary = f"{reduction.ops_before} -> {reduction.ops_after} ops in {seconds:.1f} s, {compiles} compiles"
    if reduction.stop is not StopReason.MINIMAL:
        return f"NOT MINIMAL: {reduction.how}; the smallest failing graph found so far ({summary})"
    return (f"minified by pytest-torchcompile ({summary}): {reduction.how}; "
            "1-minimal: without any one of its ops it no longer fails")


def _minified_case(case: ReproCase, reduction: Reduction, note: str, generated_code: str,
                   stage: StageAttribution | None) -> ReproCase:
    assert reduction.gm is not None
    label = "" if reduction.stop is StopReason.MINIMAL else f", {reduction.stop.label}"
    return replace(
        case, gm=reduction.gm, inputs=reduction.inputs,
        check_non_float=JudgeSettings.for_minifying(case).check_non_float,
        symbolic_sizes=[], notes=[*case.notes, note], generated_code=generated_code,
        stage=stage.summary if stage is not None else "",
        status_line=f"{case.status_line or case.kind} (minified {reduction.ops_before} -> {reduction.ops_after} ops{label})",
    )


def _generated_code(source: str | None) -> tuple[str, str] | None:
    """The code Inductor generated for the minified graph and its file suffix: the C++ kernels on
    a CPU; on a GPU the whole module, whose Triton kernels are Python."""
    if source is None:
        return None
    cpp = _torch_compat.cpp_kernels(source)
    return (cpp, ".cpp") if cpp else (source, ".py")


def _write_kernel(generated: tuple[str, str] | None, directory: Path) -> Path | None:
    if generated is None:
        return None
    code, suffix = generated
    path = directory / f"minified_kernel{suffix}"
    with locked(directory):
        atomic_write(path, code.encode())
    return path
