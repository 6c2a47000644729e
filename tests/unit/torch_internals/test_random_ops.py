"""Which calls draw random numbers: a random op's, but a dropout of probability 0 or outside
training, which draws nothing. Such a call is judged as any other: an fp64 run that replayed its
results would hand eager's values to the reference (a flash attention's log-sum-exp, in a
language model's training mode whose attention dropout is 0)."""

from __future__ import annotations

import operator

import torch
import torch.fx
from torch.fx.experimental.proxy_tensor import make_fx

from pytest_torchcompile.judging.judge import compare_graph_outputs
from pytest_torchcompile.judging.seeding import draws_random
from pytest_torchcompile.torch_internals.random_ops import (
    draws_random_numbers,
    generator_state_outputs,
)
from pytest_torchcompile.torch_internals.rng import recording_random_draws

aten = torch.ops.aten


def test_a_dropout_of_probability_zero_or_outside_training_draws_nothing() -> None:
    x = torch.randn(4)
    assert draws_random_numbers(aten.native_dropout.default, (x, 0.5, True))
    assert not draws_random_numbers(aten.native_dropout.default, (x, 0.0, True))
    assert not draws_random_numbers(aten.native_dropout.default, (x, 0.5, False))
    assert not draws_random_numbers(aten.native_dropout.default, (x,), {"p": 0.0, "train": True})
    assert draws_random_numbers(aten.rand.default, ([4],))
    assert not draws_random_numbers(aten.add.Tensor, (x, x))


def _attention(dropout: float):  # type: ignore[no-untyped-def]
    def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.scaled_dot_product_attention(q, k, v, dropout_p=dropout)

    return attention


def test_an_attention_without_dropout_draws_nothing_and_is_not_replayed() -> None:
    q, k, v = (torch.randn(2, 2, 8, 16) for _ in range(3))
    assert not draws_random(make_fx(_attention(0.0))(q, k, v))
    assert draws_random(make_fx(_attention(0.1))(q, k, v))
    draws: list[tuple[object, object]] = []
    with recording_random_draws(draws):
        _attention(0.0)(q, k, v)
    assert draws == []


def _attention_graph() -> torch.fx.GraphModule:
    """A CUDA attention's forward graph as AOT autograd writes it for a backward: its output,
    log-sum-exp, and the philox seed and offset it drew from (not run here: built, not traced)."""
    graph = torch.fx.Graph()
    q, k, v = (graph.placeholder(name) for name in "qkv")
    attention = graph.call_function(
        aten._scaled_dot_product_efficient_attention.default, (q, k, v, None, True)
    )
    results = [graph.call_function(operator.getitem, (attention, index)) for index in range(4)]
    graph.output(tuple(results))
    return torch.fx.GraphModule(torch.nn.Module(), graph)


def test_the_generator_state_a_random_op_returns_is_no_value_to_judge() -> None:
    gm = _attention_graph()
    assert generator_state_outputs(gm) == [2, 3]
    assert generator_state_outputs(lambda x: x) == []
    values = [torch.ones(4), torch.zeros(4), torch.tensor(7), torch.tensor(11)]
    compiled = [*values[:2], torch.tensor(8), torch.tensor(12)]  # the state of another generator
    leaves = compare_graph_outputs(compiled, values, None, 1e-4, True, not_values=[2, 3])
    assert [leaf.path for leaf in leaves] == ["graph_out[0]", "graph_out[1]"]
    assert all(leaf.passed for leaf in leaves)
