"""A graph's reference results: eager in its own precision, fp64 (every dtype named inside widened,
inputs widened at first use), forward and backward, and the elements that are no values: those
that depend on memory no op wrote, and gradients through a NaN.

Embedded in every full repro file with ``judge.py``: torch and the standard library only.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from typing import Any

import torch

from pytest_torchcompile.judging.copies import clone_values, widened_copy
from pytest_torchcompile.judging.mutation import may_write
from pytest_torchcompile.judging.seeding import seeded_alike
from pytest_torchcompile.judging.tensor_comparison import differing_elements
from pytest_torchcompile.torch_internals.fp64 import float64_everywhere
from pytest_torchcompile.torch_internals.nan_gradients import nan_gradients_filled
from pytest_torchcompile.torch_internals.unwritten import filling_unwritten


def run_graph(
    module: Callable[..., Any],
    inputs: Sequence[Any],
    backward: bool = False,
    mutated: Sequence[int] = (),
    copied: bool = False,
) -> list[Any]:
    """The outputs of ``module`` on copies of ``inputs``; with ``backward``, followed by the
    gradients of the summed floating outputs with respect to every input that requires grad; then
    the copies of the inputs at the positions ``mutated`` (:func:`mutated_inputs`) as the call left
    them. ``copied``: ``inputs`` are already such copies, made for this run alone (detached, the
    floating ones that require grad leaves that do), and are used as they are."""
    if not backward:
        return _run_forward(module, inputs, mutated, copied)
    args = list(inputs) if copied else clone_values(inputs, keep_grad=True)
    written = [args[index] for index in mutated]
    with torch.enable_grad():
        outputs = list(module(*args))
        wrt = [a for a in args if isinstance(a, torch.Tensor) and a.requires_grad]
        gradients = _gradients(outputs, wrt)
    return [*_detached(outputs), *gradients, *_detached(written)]


def _run_forward(
    module: Callable[..., Any], inputs: Sequence[Any], mutated: Sequence[int], copied: bool
) -> list[Any]:
    """:func:`run_graph` without the backward."""
    # A graph that writes into no argument runs on the inputs themselves: a copy of them (a
    # model's weights) would sit beside the copy the caller keeps.
    args = list(inputs) if copied or not may_write(module) else clone_values(inputs)
    with torch.no_grad():
        return [*module(*args), *(args[index] for index in mutated)]


def _gradients(outputs: Sequence[Any], wrt: Sequence[torch.Tensor]) -> list[torch.Tensor]:
    """The gradients of the summed floating outputs with respect to ``wrt``, zeros where none
    flows; none where no output requires grad."""
    floating = [o for o in outputs if isinstance(o, torch.Tensor) and o.requires_grad]
    if not floating:
        return []
    loss = torch.stack([o.float().sum() for o in floating]).sum()
    grads = torch.autograd.grad(loss, wrt, allow_unused=True)
    return [g if g is not None else torch.zeros_like(a) for a, g in zip(wrt, grads, strict=True)]


def _detached(values: Sequence[Any]) -> list[Any]:
    return [v.detach() if isinstance(v, torch.Tensor) else v for v in values]


def reference_outputs(
    module: Callable[..., Any],
    inputs: Sequence[Any],
    backward: bool = False,
    mutated: Sequence[int] = (),
) -> tuple[list[Any], list[Any] | None]:
    """Eager outputs in the original dtype, and in fp64 (None where the graph cannot run in fp64)."""
    eager, fp64, _ = reference_results(module, inputs, backward, mutated)
    return eager, fp64


def reference_results(
    module: Callable[..., Any],
    inputs: Sequence[Any],
    backward: bool = False,
    mutated: Sequence[int] = (),
) -> tuple[list[Any], list[Any] | None, Exception | None]:
    """:func:`reference_outputs`, and what stopped the fp64 run where it could not run (None
    where it ran): a check says why it judged without an fp64 reference."""
    with seeded_alike(module):
        eager = run_graph(module, inputs, backward, mutated)
    with seeded_alike(module):
        return eager, *fp64_results(module, inputs, backward, mutated)


UNLIKE_FILLS = (float("nan"), 7.0)
"""What the two runs that find the results depending on something not a value fill it with (memory
no op wrote, a gradient at a NaN): unlike values (NaN spreads through nearly every op), in integer
tensors 0 and 7."""


def unwritten_elements(
    module: Callable[..., Any],
    inputs: Sequence[Any],
    backward: bool = False,
    mutated: Sequence[int] = (),
) -> list[torch.Tensor | None] | None:
    """Per output of ``module`` (as :func:`run_graph` returns them), the elements that depend on
    memory no op wrote (``empty``, ``empty_like``, ``empty_strided``, ``new_empty`` and views of
    them, until written): they hold whatever the allocator gave, in eager and compiled code alike,
    and are no values to judge. None when ``module`` allocates no such memory, or cannot run."""
    runs = []
    for fill in UNLIKE_FILLS:
        allocated: list[int] = []
        try:
            with seeded_alike(module), filling_unwritten(fill, allocated):
                runs.append(run_graph(module, inputs, backward, mutated))
        except Exception:
            return None
        if not allocated:
            return None
    return [differing_elements(first, second) for first, second in zip(*runs, strict=True)]


def holds_nan(values: Sequence[Any]) -> bool:
    """Whether a floating tensor among ``values`` holds a NaN."""
    return any(
        isinstance(value, torch.Tensor)
        and (value.is_floating_point() or value.is_complex())
        and bool(torch.isnan(value).any())
        for value in values
    )


def nan_dependent_gradients(
    module: Callable[..., Any],
    inputs: Sequence[Any],
    mutated: Sequence[int] = (),
    results: Sequence[Any] | None = None,
) -> list[torch.Tensor | None] | None:
    """Per result of ``module`` run forward and backward (as :func:`run_graph` returns them), the
    gradient elements that depend on a value eager's forward computed as NaN (an input's or an
    op's): eager's kernels give those no one value (:func:`nan_gradients_filled`), so they are not
    judged. None when the forward meets no NaN that requires grad, or cannot run.

    ``results``: eager's results, where known. Without a NaN among them and ``inputs`` nothing is
    run: a NaN the forward computes and hides from its outputs (``where``, ``nan_to_num``) passes
    its backward a zero gradient, which an op's backward at the NaN gives back as 0 or as NaN, the
    latter in eager's gradients."""
    if results is not None and not holds_nan([*inputs, *results]):
        return None
    runs = []
    for fill in UNLIKE_FILLS:
        filled: list[int] = []
        try:
            with seeded_alike(module):
                runs.append(
                    run_graph(nan_gradients_filled(module, fill, filled), inputs, True, mutated)
                )
        except Exception:
            return None
        if not filled:
            return None
    return [differing_elements(first, second) for first, second in zip(*runs, strict=True)]


def either(
    first: Sequence[torch.Tensor | None] | None, second: Sequence[torch.Tensor | None] | None
) -> list[torch.Tensor | None] | None:
    """Per result, the elements that one list of masks or the other marks."""
    if first is None:
        return None if second is None else list(second)
    if second is None:
        return list(first)
    return [
        a if b is None else b if a is None else a | b for a, b in zip(first, second, strict=True)
    ]


def fp64_outputs(
    module: Callable[..., Any],
    inputs: Sequence[Any],
    backward: bool = False,
    mutated: Sequence[int] = (),
) -> list[Any] | None:
    """The outputs of ``module`` run in fp64, or None where it cannot run in fp64."""
    return fp64_results(module, inputs, backward, mutated)[0]


def fp64_results(
    module: Callable[..., Any],
    inputs: Sequence[Any],
    backward: bool = False,
    mutated: Sequence[int] = (),
) -> tuple[list[Any] | None, Exception | None]:
    """:func:`fp64_outputs`, and the error that stopped the fp64 run (None where it ran)."""
    try:
        with float64_everywhere():
            if isinstance(module, torch.fx.GraphModule) and not backward and not mutated:
                return run_graph(_widening_at_first_use(module), inputs, copied=True), None
            # Widened copies serve as the run's own: a second copy would double the fp64 inputs
            # (a graph's inputs hold a model's weights), the most memory a check needs.
            return run_graph(
                module, [widened_copy(v, backward) for v in inputs], backward, mutated, copied=True
            ), None
    except Exception as error:
        return None, error


def _widening_at_first_use(gm: torch.fx.GraphModule) -> torch.fx.GraphModule:
    """``gm`` taking its inputs as they are and widening each (:func:`widened_copy`) right before
    the first op that reads it, every use reading the widened value. A graph module's code drops
    each value after its last use: an fp64 run then holds the widened inputs of a few ops at a
    time (a layer's weights), not a widened copy of every input (all of a model's weights, twice
    their fp32 size). Its results are those of the graph run on widened copies."""
    graph = copy.deepcopy(gm.graph)
    order = {node: position for position, node in enumerate(graph.nodes)}
    for node in list(graph.find_nodes(op="placeholder")):
        if not node.users:
            continue
        with graph.inserting_before(min(node.users, key=order.__getitem__)):
            wide = graph.call_function(widened_copy, (node, False))
        node.replace_all_uses_with(wide, delete_user_cb=lambda user, wide=wide: user is not wide)
    return torch.fx.GraphModule(gm, graph)
