"""A backward graph is handed the activations its forward saved as Inductor laid them out
(channels-last on CPU, where Inductor lays convolutions out so), while its ops were traced on
eager's layout: a ``view`` of a max-pool's saved offsets cannot run eagerly on the channels-last
copy. The graph is judged against eager run on its inputs laid out as traced, and a graph whose
eager run raises anyway is noted unchecked, never an error in the test that called it."""

from __future__ import annotations

import pytest
import torch

from pytest_torchcompile.checking import plain
from pytest_torchcompile.checking.plain import GraphChecker
from pytest_torchcompile.common.verdict import DEFAULT_TOLERANCE
from pytest_torchcompile.torch_internals.compiling import reset


def _pooled_then_convolved() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Conv2d(3, 8, 3, padding=1),
        torch.nn.BatchNorm2d(8),
        torch.nn.ReLU(),
        torch.nn.MaxPool2d(2),
        torch.nn.Conv2d(8, 4, 3, padding=1),
    ).train()


def _checked_step(model: torch.nn.Module) -> GraphChecker:
    checker = GraphChecker(DEFAULT_TOLERANCE, check_non_float=True, intermediates=False)
    x = torch.randn(4, 3, 8, 8)
    reset()
    try:
        with checker.watching():
            torch.compile(model)(x).mean().backward()
    finally:
        reset()
    return checker


def _relaid_backward_inputs(checker: GraphChecker) -> int:
    """How many inputs of the backward graph came laid out otherwise than the graph was traced."""
    [backward] = [graph for graph in checker.capture.graphs if graph.kind == "backward"]
    traced = [node.meta["val"] for node in backward.gm.graph.nodes if node.op == "placeholder"]
    return sum(
        isinstance(value, torch.Tensor) and value.stride() != fake.stride()
        for value, fake in zip(backward.calls[0], traced, strict=True)
    )


def test_a_backward_graph_given_activations_in_inductors_layout_is_judged() -> None:
    checker = _checked_step(_pooled_then_convolved())
    assert _relaid_backward_inputs(checker) > 0, (
        "Inductor no longer lays the saved activations out otherwise"
    )
    assert checker.tally.failures == [] and checker.tally.unchecked == []
    assert sorted(checker.tally.judged) == [0, 1]


def _viewing(x: torch.Tensor) -> tuple[torch.Tensor]:
    return (torch.ops.aten.view.default(x, [-1]) * 2,)


def test_a_graph_that_raises_eagerly_on_its_inputs_is_noted_unchecked_not_raised() -> None:
    """Its placeholders keep no traced layout to fall back on: the eager run cannot be made."""
    gm = torch.fx.symbolic_trace(_viewing)
    transposed = torch.randn(4, 3).t()
    checker = GraphChecker(DEFAULT_TOLERANCE, check_non_float=True, intermediates=False)
    with checker.watching():
        call = checker.capture.hook(
            gm, [transposed], {"is_backward": True}, lambda: lambda args: [args[0].reshape(-1) * 2]
        )
        [output] = call([transposed])
    assert torch.equal(output, transposed.reshape(-1) * 2)
    assert checker.tally.failures == [] and checker.tally.judged == {}
    [note] = checker.tally.unchecked
    assert (
        "raises when run eagerly on the inputs of its compiled call (RuntimeError: view size"
        in note
    )


def test_a_graph_that_raises_eagerly_counts_as_judged_through_its_torch_level_graph(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Where a post-AOT graph cannot run eagerly on its inputs (torchao's fp8 graphs), its
    torch-level graph is judged instead; passing, it counts once, as judged, not as unchecked."""

    def raising(*args: object) -> None:
        raise RuntimeError("cannot run eagerly here")

    monkeypatch.setattr(plain, "eager_references", raising)
    checker = GraphChecker(DEFAULT_TOLERANCE, check_non_float=True, intermediates=False)
    reset()
    try:
        with checker.watching():
            torch.compile(lambda x: (x.sin() * 2,))(torch.randn(8))
    finally:
        reset()
    assert checker.tally.failures == [] and checker.tally.unchecked == []
    assert list(checker.tally.judged) == [0]
