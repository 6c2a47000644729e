"""Cuts of a graph, and several cuts as one graph."""

from __future__ import annotations

import torch
from torch.fx.experimental.proxy_tensor import make_fx

from pytest_torchcompile.judging.slicing import GraphSlicer, side_by_side


def chain(x: torch.Tensor) -> torch.Tensor:
    return (x.sin() * torch.tensor([2.0])).relu().exp() + torch.tensor([3.0])


def test_cuts_side_by_side_compute_what_each_computes_alone() -> None:
    x = torch.randn(5)
    gm = make_fx(chain)(x)
    slicer = GraphSlicer(gm, [x])
    units = [unit for unit in slicer.order if slicer.units[unit][0].op == "call_function"]
    # The first cut holds none of the graph's constants, the others one each.
    cuts = [
        slicer.slice(frozenset(units[:1])),
        slicer.slice(frozenset(units[1:3])),
        slicer.slice(frozenset(units[3:])),
    ]
    assert sum(node.op == "get_attr" for cut, _ in cuts for node in cut.graph.nodes) == 2
    assert not any(node.op == "get_attr" for node in cuts[0][0].graph.nodes)
    together, inputs, spans = side_by_side(gm, cuts)
    outputs = together(*inputs)
    assert [len(span) for span in spans] == [1, 1, 1]
    for (cut, cut_inputs), span in zip(cuts, spans, strict=True):
        alone = cut(*cut_inputs)
        assert all(
            torch.equal(outputs[index], value) for index, value in zip(span, alone, strict=True)
        )


def quantised_lookup(x: torch.Tensor, table: torch.Tensor) -> torch.Tensor:
    index = (x.sin() * 4).round().long().clamp(0, 3)
    return table[index] * 2


def test_a_deviation_carried_by_an_index_starts_where_the_index_comes_from() -> None:
    """An index is not judged (not floating): a lookup that deviates because the index moved does
    not start a deviation, the value the index was rounded from does."""
    x, table = torch.randn(6), torch.randn(4)
    slicer = GraphSlicer(make_fx(quantised_lookup)(x, table), [x, table])
    diverged = {
        node for node in slicer.unit_of if node.name in ("sin", "mul", "round_1", "index", "mul_1")
    }
    assert slicer.deviation_roots(diverged, set()) == ["sin", "index"]
    assert slicer.deviation_roots(slicer.carried(diverged), set()) == ["sin"]


def relu_of_a_mean(x: torch.Tensor) -> torch.Tensor:
    _, mean = torch.var_mean(x * 3, 0)
    return mean.relu()


def test_only_tensors_that_are_not_floating_carry_a_deviation() -> None:
    """An op of several results (a variance and a mean) is no index: what reads its mean still
    starts a deviation of its own when the mean deviates while the value it came from did too."""
    x = torch.randn(6, 3)
    slicer = GraphSlicer(make_fx(relu_of_a_mean)(x), [x])
    diverged = {node for node in slicer.unit_of if node.name in ("mul", "relu")}
    assert slicer.deviation_roots(slicer.carried(diverged), set()) == ["mul", "relu"]
