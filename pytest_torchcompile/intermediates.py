"""Find deviations that later ops mask: a graph whose outputs pass while an intermediate fails.

A relu miscompiled at layer 61 of a 100-layer tanh MLP does not reach the output above tolerance;
judging every floating intermediate of the compiled graph against its own fp64 value still sees
it. The evidence handed back is a real graph that fails on its own outputs: the graph cut right
after the first diverging op, so its repro reproduces and minifies like any other.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.fx

from .minify import GraphSlicer, output_index
from .oracle import LeafResult
from .standalone import ACCURACY, judge_graph


@dataclass
class MaskedDivergence:
    """The first op whose compiled value deviates although the graph's outputs pass."""

    node: str
    leaf: LeafResult
    gm: torch.fx.GraphModule
    inputs: list[Any]

    @property
    def message(self) -> str:
        ratio = self.leaf.ratio
        return (f"the outputs pass, but intermediate {self.node!r} deviates"
                + (f" ({ratio:.1f}x eager's error vs fp64)" if ratio is not None else "")
                + ": a later op masks it")


def find_masked_divergence(gm: torch.fx.GraphModule, inputs: Sequence[Any], tol: float) -> MaskedDivergence | None:
    """One compile of ``gm`` returning every floating intermediate; None when all of them pass
    (or the probe cannot be built: that graph is then judged on its outputs alone)."""
    try:
        slicer = GraphSlicer(gm, inputs)
    except Exception:
        return None
    observed = slicer.floating_nodes()
    if not observed:
        return None
    probe, probe_inputs = slicer.slice(frozenset(slicer.order), outputs=observed)
    verdict = judge_graph(probe, probe_inputs, tol, check_non_float=False)
    if verdict.failure != ACCURACY:
        return None
    diverged = {observed[output_index(leaf.path)]: leaf for leaf in verdict.leaves if not leaf.passed}
    roots = slicer.divergence_roots(set(diverged), set())
    if not roots:
        return None
    root = roots[0]
    node = next(n for n in slicer.units[root] if n in diverged)
    prefix = frozenset(slicer.order[: slicer.order.index(root) + 1])
    prefix_gm, prefix_inputs = slicer.slice(prefix, outputs=[node])
    return MaskedDivergence(root, diverged[node], prefix_gm, prefix_inputs)
