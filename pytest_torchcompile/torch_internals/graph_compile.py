"""Compiling one FX graph as a repro does: a post-AOT graph with Inductor alone, a torch-level graph
through the whole stack.

Imports the standard library and torch only: every full repro file embeds this module whole."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
import torch.fx

# Imports inside functions: Dynamo's and Inductor's modules load when a compile needs them, as
# a test's own compile would load them, not with this module (their import-time warnings and
# state are the test's).


def compile_graph(gm: torch.fx.GraphModule, inputs: Sequence[Any]) -> Callable[..., Any]:
    """Compile a post-AOT (aten-level) FX graph with Inductor and return a plain callable."""
    from torch._inductor.compile_fx import compile_fx_inner

    compiled = compile_fx_inner(gm, list(inputs))

    def run(*args: Any) -> Any:
        return compiled(list(args))

    run.inductor_compiled = compiled  # type: ignore[attr-defined]
    return run


def compile_dynamo_graph(
    gm: torch.fx.GraphModule, inputs: Sequence[Any] = ()
) -> Callable[..., Any]:
    """Compile a torch-level (Dynamo) FX graph through the whole stack, as ``torch.compile`` does:
    AOT autograd, Inductor's decompositions, Inductor. The Inductor config in force applies.
    AOT autograd's cache is off: its key does not cover the decomposition table, so it could hand
    back code compiled before a fix."""
    import torch._dynamo
    import torch._functorch.config

    del inputs  # compiled at the first call, for the grad mode of that call
    torch._dynamo.reset()
    compiled = torch.compile(gm, backend="inductor", fullgraph=True, dynamic=False)

    def run(*args: Any) -> Any:
        with torch._functorch.config.patch(enable_autograd_cache=False):
            return compiled(*args)

    return run


VISIBLE_OUTPUTS_KEY = "user_visible_output_idxs"


def visible_outputs(gm: torch.fx.GraphModule) -> list[int] | None:
    """The outputs AOT autograd told Inductor the user sees, by position: Inductor lays those out
    with the strides of their traced values, the others as it likes. None where the graph is
    unmarked (a torch-level graph, one rebuilt from code)."""
    marked = gm.graph.find_nodes(op="output")[0].meta.get(VISIBLE_OUTPUTS_KEY)
    return None if marked is None else list(marked)


def with_visible_outputs(
    gm: torch.fx.GraphModule, outputs: Sequence[int] | None
) -> torch.fx.GraphModule:
    """``gm`` with ``outputs`` marked as :func:`visible_outputs` reads them (unchanged where None):
    a graph rebuilt from code has lost the mark, and Inductor would lay its outputs out otherwise."""
    if outputs is not None:
        gm.graph.find_nodes(op="output")[0].meta[VISIBLE_OUTPUTS_KEY] = list(outputs)
    return gm
