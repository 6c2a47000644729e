"""Find deviations that later ops mask: a graph whose outputs pass while an intermediate fails.

A relu miscompiled at layer 61 of a 100-layer tanh MLP does not reach the output above tolerance;
judging the floating intermediates of the compiled graph that a later op can hide (tanh saturates)
against their own fp64 values still sees it. An intermediate can also cross the line only because
the (correct) rounding of compiled code upstream of it adds up, so a finding counts only when the
op where the deviation starts deviates on its own: fed with eager's values, alone or with its
nearest neighbours (a fusion bug needs them). That small graph is the evidence handed back; its
repro reproduces and minifies like any other.
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.fx

from pytest_torchcompile.common.kinds import FailureKind
from pytest_torchcompile.common.leaves import LeafResult, LeafRule
from pytest_torchcompile.common.options import concurrent_probe
from pytest_torchcompile.judging.capture import CapturedGraph, TensorSpec, input_spec
from pytest_torchcompile.judging.isolation.parent import IsolatedJudge, IsolationError
from pytest_torchcompile.judging.isolation.protocol import GraphToPrepare, JudgeSettings
from pytest_torchcompile.judging.judge import GraphVerdict, devices_of, judge_graph
from pytest_torchcompile.judging.slicing import (
    ROOTS_TRIED_ALONE,
    GraphSlicer,
    output_index,
    side_by_side,
)
from pytest_torchcompile.torch_internals.ops import rounds_to_steps

NEIGHBOURHOOD_RADII = (0, 1, 2, 4)
"""Producer/consumer steps around the op where a deviation starts that are judged with it."""


@dataclass
class MaskedDeviation:
    """The first op whose compiled value deviates although the graph's outputs pass."""

    node: str
    leaf: LeafResult
    gm: torch.fx.GraphModule
    inputs: list[Any]
    ops: int

    @property
    def message(self) -> str:
        ratio = self.leaf.ratio
        return (
            f"the outputs pass, but intermediate {self.node!r} deviates"
            + (
                f" ({ratio:.1f}x eager's error vs fp64)"
                if ratio is not None
                else f" ({self.leaf.rule})"
            )
            + ": a later op masks it"
        )

    @property
    def shown_leaf(self) -> LeafResult:
        """The deviating intermediate as a row of the check's table and report, named by its op
        (the probe's output position means nothing to a reader)."""
        return dataclasses.replace(self.leaf, path=f"intermediate {self.node}")

    @property
    def note(self) -> str:
        company = "alone" if self.ops == 1 else f"with its neighbours ({self.ops} ops)"
        return (
            f"the op {self.node!r} fed with eager's values, {company}: it deviates on its own; "
            "in the full graph a later op masks it"
        )


CONCURRENT_PROBE_MIN_OPS = 100
"""Graphs with fewer ops are probed in this process: their probe compiles in a few seconds at
most, about what a child's compile of it would wait for this process's CPUs."""

CONCURRENT_PROBE_MIN_THREADS = 4
"""The threads this process must have (its share of the run's CPUs, :mod:`budget`) to give a
child's compile some: on fewer, the two compiles would take turns on the same cores."""


@dataclass(frozen=True)
class PreparedProbe:
    """A graph's probe, sent to a child to compile while this process compiles the graph."""

    judge: IsolatedJudge
    key: int
    observed: tuple[str, ...]
    """The names of the values the probe returns, in its order."""
    input_specs: tuple[TensorSpec, ...]

    def verdict(self, inputs: Sequence[Any], tol: float) -> GraphVerdict | None:
        """The probe judged in the child on ``inputs``; None where it must be judged here (inputs
        laid out unlike the compiled probe expects, a child that cannot judge it)."""
        if len(inputs) != len(self.input_specs) or any(
            not isinstance(value, torch.Tensor) or input_spec(value) != spec
            for value, spec in zip(inputs, self.input_specs, strict=True)
        ):
            return None
        verdict = self.judge.judge_prepared(self.key, list(inputs), JudgeSettings(tol))
        return None if verdict.failure == FailureKind.JUDGE_ERROR else verdict


class ProbeChildren:
    """The children that compile probes for one process, one per device it probes graphs on,
    each started at its first probe (or by :meth:`start`); whoever makes one closes it."""

    def __init__(self) -> None:
        self._judges: dict[str | None, IsolatedJudge | None] = {}
        """None where the child could not start."""
        self._stack = contextlib.ExitStack()
        self.keys = itertools.count()
        """Keys of the probes sent, unique across this process's children."""

    def judge(self, device: str | None) -> IsolatedJudge | None:
        if device not in self._judges:
            try:
                judge = self._stack.enter_context(
                    IsolatedJudge(device=device, candidate_timeout_s=PROBE_TIMEOUT_S)
                )
                judge.warm_up()
            except (IsolationError, OSError):
                judge = None
            self._judges[device] = judge
        return self._judges[device]

    def start(self, device: str | None) -> None:
        """Start the child that will compile probes on ``device`` (None: the CPU) now, where this
        process uses one: it starts, and pays Inductor's one-time costs there, while this process
        goes on (collects tests, runs a model eagerly and traces it)."""
        if _children_wanted():
            self.judge(device)

    def close(self) -> None:
        self._stack.close()
        self._judges.clear()


@dataclass
class ConcurrentProbes:
    """Probes of the graphs one capture sees, compiled in a child of ``children`` from the moment
    Inductor receives each graph (:meth:`prepare`, a lowering observer of the capture); without
    children, every graph is probed in this process."""

    children: ProbeChildren | None = None
    prepared: dict[int, PreparedProbe] = field(default_factory=dict)
    """By the captured graph's index."""

    def prepare(self, graph: CapturedGraph) -> None:
        if self.children is None or not _worth_a_child(graph):
            return
        try:
            judge = self.children.judge(graph_device(graph))
            if judge is None:
                return
            slicer = GraphSlicer(graph.gm, None)
            probe, _, observed = slicer.probe(slicer.hidden_nodes())
            if not observed:
                return
            key = next(self.children.keys)
            judge.prepare(probe, GraphToPrepare(key, graph.config_source, list(graph.input_specs)))
        except Exception:
            return  # probed here, as without a child
        self.prepared[graph.index] = PreparedProbe(
            judge, key, tuple(node.name for node in observed), tuple(graph.input_specs)
        )


def device_of(values: Sequence[Any]) -> str | None:
    """The accelerator ``values`` are on (the first, by name), None for the CPU."""
    return _accelerator(devices_of(values))


def graph_device(graph: CapturedGraph) -> str | None:
    """The accelerator a captured graph's tensor inputs are on, None for the CPU (its other
    inputs, sizes among them, are on none)."""
    return _accelerator([spec.device for spec in graph.input_specs if isinstance(spec, TensorSpec)])


def current_device() -> str | None:
    """The GPU this process compiles for by default, None without one."""
    return f"cuda:{torch.cuda.current_device()}" if torch.cuda.is_available() else None


def _children_wanted() -> bool:
    chosen = concurrent_probe()
    return chosen == "1" or (
        chosen != "0" and torch.get_num_threads() >= CONCURRENT_PROBE_MIN_THREADS
    )


def _accelerator(devices: Iterable[torch.device]) -> str | None:
    return min((str(device) for device in devices if device.type != "cpu"), default=None)


def _worth_a_child(graph: CapturedGraph) -> bool:
    """A static graph without random ops; unless :func:`concurrent_probe` says otherwise, a
    large one in a process with CPUs to spare for the child."""
    if not _children_wanted() or graph.has_random_ops or not _static(graph):
        return False
    return concurrent_probe() == "1" or graph.op_count >= CONCURRENT_PROBE_MIN_OPS


def _static(graph: CapturedGraph) -> bool:
    """Whether every input of a graph is a tensor of fixed sizes (a probe compiled for them
    fits its every call)."""
    return all(isinstance(spec, TensorSpec) for spec in graph.input_specs) and all(
        size.isdigit() for sizes in graph.symbolic_sizes for size in sizes or ()
    )


PROBE_TIMEOUT_S = 1800.0
"""How long a probe's verdict is waited for once its graph has run: its compile may have started
little before, and a compile this process made would have no limit at all."""


def find_masked_deviation(
    gm: torch.fx.GraphModule,
    inputs: Sequence[Any],
    tol: float,
    prepared: PreparedProbe | None = None,
) -> MaskedDeviation | None:
    """One compile of ``gm`` returning the floating intermediates a later op can mask
    (``prepared``: compiled in a child); where some deviate, one more compile of the ops where the
    deviations start, each alone and with its neighbours, side by side, to confirm that one
    deviates on its own. None when nothing does (or the probe cannot be built: that graph is then
    judged on its outputs alone)."""
    try:
        slicer = GraphSlicer(gm, inputs)
    except Exception:
        return None
    probed = _probed(slicer, inputs, tol, prepared)
    if probed is None:
        return None
    observed, verdict = probed
    if verdict.failure != FailureKind.ACCURACY:
        return None
    diverged = _diverged(observed, verdict)
    windows = _windows(slicer, diverged)
    cuts = [
        slicer.slice(window, outputs=[n for n in observed if slicer.unit_of[n] in window])
        for _, window in windows
    ]
    first = _first_deviating(slicer.gm, cuts, tol, _all_finite(inputs))
    if first is None:
        return None
    (root, window), (candidate, candidate_inputs) = windows[first], cuts[first]
    node = next(n for n in slicer.units[root] if n in diverged)
    return MaskedDeviation(
        root, diverged[node], candidate, candidate_inputs, slicer.op_count(window)
    )


def _probed(
    slicer: GraphSlicer, inputs: Sequence[Any], tol: float, prepared: PreparedProbe | None
) -> tuple[list[torch.fx.Node], GraphVerdict] | None:
    """The intermediates a later op can mask and the probe's verdict on them, judged in the
    child that compiled it where it can, else compiled here; None where there are none."""
    remote = prepared.verdict(inputs, tol) if prepared is not None else None
    if prepared is not None and remote is not None:
        by_name = {node.name: node for node in slicer.unit_of}
        return [by_name[name] for name in prepared.observed], remote
    probe, probe_inputs, observed = slicer.probe(slicer.hidden_nodes())
    if not observed:
        return None
    return observed, judge_graph(probe, probe_inputs, tol, check_non_float=False)


def _diverged(
    observed: list[torch.fx.Node], verdict: GraphVerdict
) -> dict[torch.fx.Node, LeafResult]:
    """The observed intermediates that deviate, with their rows of the probe's verdict."""
    return {
        observed[index]: leaf
        for leaf in verdict.leaves
        if not leaf.passed and (index := output_index(leaf.path)) is not None
    }


def _windows(
    slicer: GraphSlicer, diverged: dict[torch.fx.Node, LeafResult]
) -> list[tuple[str, frozenset[str]]]:
    """The ops where the deviations start, each with the neighbourhoods it is judged in."""
    windows: list[tuple[str, frozenset[str]]] = []
    for root in slicer.deviation_roots(slicer.carried(set(diverged)), set())[:ROOTS_TRIED_ALONE]:
        # Among compiled neighbours, a rounding difference of theirs (a fused multiply-add, say)
        # can move a rounding op's result by a whole step: such an op is judged on eager's values.
        radii = (0,) if rounds_to_steps(slicer.units[root][0].target) else NEIGHBOURHOOD_RADII
        for radius in radii:
            window = slicer.neighbourhood(root, radius, frozenset(slicer.order))
            if (root, window) not in windows:
                windows.append((root, window))
    return windows


def _first_deviating(
    root: torch.fx.GraphModule,
    cuts: list[tuple[torch.fx.GraphModule, list[Any]]],
    tol: float,
    graph_inputs_finite: bool,
) -> int | None:
    """The first of ``cuts`` that deviates compiled on its own (:func:`deviates_on_its_own`).
    Several are judged side by side in one compile first (a compile of a few ops costs about as
    much as one of many): only those that deviate there are compiled alone, in order."""
    suspects = _suspects(root, cuts, tol) if len(cuts) > 1 else range(len(cuts))
    return next(
        (
            index
            for index in suspects
            if deviates_on_its_own(
                judge_graph(*cuts[index], tol, check_non_float=False),
                cuts[index][1],
                graph_inputs_finite,
            )
        ),
        None,
    )


def _suspects(
    root: torch.fx.GraphModule, cuts: list[tuple[torch.fx.GraphModule, list[Any]]], tol: float
) -> Iterable[int]:
    """The cuts that deviate judged side by side in one compile: none where none does; every
    one where that compile says nothing of which (it raised, or fails on no output)."""
    together, inputs, spans = side_by_side(root, cuts)
    verdict = judge_graph(together, inputs, tol, check_non_float=False)
    if verdict.failure is None:
        return []
    failing = {output_index(leaf.path) for leaf in verdict.leaves if not leaf.passed}
    if verdict.failure != FailureKind.ACCURACY or None in failing:
        return range(len(cuts))
    return [index for index, span in enumerate(spans) if failing & set(span)]


def deviates_on_its_own(
    verdict: GraphVerdict, cut_inputs: Sequence[Any], graph_inputs_finite: bool
) -> bool:
    """Whether a cut's verdict is a finding: an accuracy failure, unless it is only where
    non-finite values go in an op fed with eager's own overflow (finite graph inputs, non-finite
    values in the cut's). Which outputs an infinity reaches depends on the op's algorithm, not on
    its correctness: a convolution's tiling mixes neighbouring inputs (timm's ``mobileone_s0`` in
    fp16 with random weights overflows upstream, and compiled code's convolution then had 128
    more non-finite values of 401408 than eager's, 381571 of them non-finite already)."""
    if verdict.failure != FailureKind.ACCURACY:
        return False
    only_non_finite = all(
        leaf.rule == LeafRule.NON_FINITE for leaf in verdict.leaves if not leaf.passed
    )
    return not (only_non_finite and graph_inputs_finite and not _all_finite(cut_inputs))


def _all_finite(values: Sequence[Any]) -> bool:
    return all(
        bool(value.isfinite().all())
        for value in values
        if isinstance(value, torch.Tensor) and (value.is_floating_point() or value.is_complex())
    )
