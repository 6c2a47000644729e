"""Find deviations that later ops mask: a graph whose outputs pass while an intermediate fails.

A relu miscompiled at layer 61 of a 100-layer tanh MLP does not reach the output above tolerance;
judging every floating intermediate of the compiled graph against its own fp64 value still sees
it. An intermediate can also cross the line only because the (correct) rounding of compiled code
upstream of it adds up, so a finding counts only when the op where the deviation starts deviates
on its own: fed with eager's values, alone or with its nearest neighbours (a fusion bug needs
them). That small graph is the evidence handed back; its repro reproduces and minifies like any
other.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.fx

from .minify import ROOTS_TRIED_ALONE, GraphSlicer, output_index
from .oracle import LeafResult
from .standalone import ACCURACY, judge_graph

NEIGHBOURHOOD_RADII = (0, 1, 2, 4)
"""Producer/consumer steps around the op where a deviation starts that are judged with it."""


@dataclass
class MaskedDivergence:
    """The first op whose compiled value deviates although the graph's outputs pass."""

    node: str
    leaf: LeafResult
    gm: torch.fx.GraphModule
    inputs: list[Any]
    ops: int

    @property
    def message(self) -> str:
        ratio = self.leaf.ratio
        return (f"the outputs pass, but intermediate {self.node!r} deviates"
                + (f" ({ratio:.1f}x eager's error vs fp64)" if ratio is not None else "")
                + ": a later op masks it")

    @property
    def note(self) -> str:
        company = "alone" if self.ops == 1 else f"with its neighbours ({self.ops} ops)"
        return (f"the op {self.node!r} fed with eager's values, {company}: it deviates on its own; "
                "in the full graph a later op masks it")


def find_masked_divergence(gm: torch.fx.GraphModule, inputs: Sequence[Any], tol: float) -> MaskedDivergence | None:
    """One compile of ``gm`` returning every floating intermediate, then a few small compiles to
    confirm where a deviation starts; None when nothing deviates on its own (or the probe cannot
    be built: that graph is then judged on its outputs alone)."""
    try:
        slicer = GraphSlicer(gm, inputs)
    except Exception:
        return None
    observed = slicer.observed_nodes()
    if not observed:
        return None
    probe, probe_inputs = slicer.slice(frozenset(slicer.order), outputs=observed)
    verdict = judge_graph(probe, probe_inputs, tol, check_non_float=False)
    if verdict.failure != ACCURACY:
        return None
    diverged = {observed[output_index(leaf.path)]: leaf for leaf in verdict.leaves if not leaf.passed}
    for root in slicer.divergence_roots(set(diverged), set())[:ROOTS_TRIED_ALONE]:
        node = next(n for n in slicer.units[root] if n in diverged)
        judged: set[frozenset[str]] = set()
        for radius in NEIGHBOURHOOD_RADII:
            window = slicer.neighbourhood(root, radius, frozenset(slicer.order))
            if window in judged:
                continue
            judged.add(window)
            kept = [n for n in observed if slicer.unit_of[n] in window]
            candidate, candidate_inputs = slicer.slice(window, outputs=kept)
            if judge_graph(candidate, candidate_inputs, tol, check_non_float=False).failure == ACCURACY:
                return MaskedDivergence(root, diverged[node], candidate, candidate_inputs, slicer.op_count(window))
    return None
