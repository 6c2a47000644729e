"""What judging a graph copies: each input once for its run, the fp64 run's widened inputs once,
one copy of a call's inputs shared between the torch-level graph and its post-AOT graph, no copy
for a slicer's values where the graph writes no input. A graph's inputs hold a model's weights,
so a second copy of them is the largest part of a check's memory."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
import torch
from torch.fx.experimental.proxy_tensor import make_fx

from pytest_torchcompile.judging import copies, references
from pytest_torchcompile.judging.capture import GraphCapture
from pytest_torchcompile.judging.slicing import GraphSlicer


def linear(x: torch.Tensor, weight: torch.Tensor) -> tuple[torch.Tensor]:
    return (x @ weight.t(),)


def scale_in_place(x: torch.Tensor) -> tuple[torch.Tensor]:
    return (x.mul_(2),)


def _copies_made(monkeypatch: pytest.MonkeyPatch) -> list[torch.Tensor]:
    copied: list[torch.Tensor] = []
    original = references.clone_values

    def spy(values: Sequence[Any], keep_grad: bool = False) -> list[Any]:
        copied.extend(value for value in values if isinstance(value, torch.Tensor))
        return original(values, keep_grad)

    # Where the runs copy: a run's own copies, and widening an input already in fp64.
    monkeypatch.setattr(references, "clone_values", spy)
    monkeypatch.setattr(copies, "clone_values", spy)
    return copied


def test_the_fp64_run_copies_an_fp32_input_once_by_widening_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    x, weight = torch.randn(3, 4), torch.randn(5, 4)
    copied = _copies_made(monkeypatch)
    outputs = references.fp64_outputs(linear, [x, weight])
    assert outputs is not None and outputs[0].dtype == torch.float64
    torch.testing.assert_close(outputs[0], x.double() @ weight.double().t())
    assert copied == []


def test_the_fp64_run_still_copies_an_input_in_fp64_already(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    x = torch.ones(4, dtype=torch.float64)
    copied = _copies_made(monkeypatch)
    outputs = references.fp64_outputs(scale_in_place, [x], mutated=[0])
    assert outputs is not None and torch.equal(
        outputs[1], torch.full((4,), 2.0, dtype=torch.float64)
    )
    assert torch.equal(x, torch.ones(4, dtype=torch.float64)) and len(copied) == 1


def test_a_post_aot_call_shares_the_copy_its_torch_level_call_made() -> None:
    model = torch.nn.Linear(8, 8)
    capture = GraphCapture()
    with torch.no_grad():
        torch.compile(model, backend=capture.backend())(torch.randn(2, 8))
    torch_level = {
        value.untyped_storage().data_ptr()
        for value in capture.dynamo_graphs[0].calls[0]
        if isinstance(value, torch.Tensor)
    }
    post_aot = [value for value in capture.graphs[0].calls[0] if isinstance(value, torch.Tensor)]
    assert post_aot and all(value.untyped_storage().data_ptr() in torch_level for value in post_aot)
    # Copies still: the test's own tensors are not what is kept.
    assert model.weight.untyped_storage().data_ptr() not in torch_level
    assert not any(value.requires_grad for value in post_aot)


def test_a_slicer_reads_inputs_a_graph_does_not_write_without_copying_them() -> None:
    x, weight = torch.randn(3, 4), torch.randn(5, 4)
    slicer = GraphSlicer(make_fx(linear)(x, weight), [x, weight])
    transpose = next(
        node for node in slicer.values if node.op == "call_function" and "t" in node.name
    )
    assert (
        slicer.values[transpose].untyped_storage().data_ptr() == weight.untyped_storage().data_ptr()
    )


def test_a_slicer_runs_a_graph_that_writes_its_input_on_a_copy() -> None:
    x = torch.ones(4)
    slicer = GraphSlicer(make_fx(scale_in_place)(x.clone()), [x])
    assert torch.equal(x, torch.ones(4))
    assert any(
        torch.equal(value, torch.full((4,), 2.0))
        for node, value in slicer.values.items()
        if node.op == "call_function"
    )


@pytest.mark.parametrize("alike", [True, False])
def test_a_call_shares_an_original_only_while_it_holds_the_same_values(alike: bool) -> None:
    model = torch.nn.Linear(8, 8)
    original = model.weight.detach().clone() + (0 if alike else 1)
    capture = GraphCapture(originals=[(model.weight, original)])
    with torch.no_grad():
        torch.compile(model, backend=capture.backend())(torch.randn(2, 8))
    recorded = [
        value
        for call in (capture.dynamo_graphs[0].calls[0], capture.graphs[0].calls[0])
        for value in call
        if isinstance(value, torch.Tensor) and value.shape == (8, 8)
    ]
    assert len(recorded) == 2 and all(torch.equal(value, model.weight) for value in recorded)
    shares = {
        value.untyped_storage().data_ptr() == original.untyped_storage().data_ptr()
        for value in recorded
    }
    assert shares == {alike}


def _widenings(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The number of fp64 tensors alive (by weak reference) as each input is widened."""
    import weakref

    alive: list[weakref.ref[torch.Tensor]] = []
    counts: list[int] = []
    original = references.widened_copy

    def spy(value: Any, keep_grad: bool) -> Any:
        counts.append(sum(ref() is not None for ref in alive))
        wide = original(value, keep_grad)
        if isinstance(wide, torch.Tensor):
            alive.append(weakref.ref(wide))
        return wide

    monkeypatch.setattr(references, "widened_copy", spy)
    return counts


def layers(x: torch.Tensor, *weights: torch.Tensor) -> tuple[torch.Tensor]:
    for weight in weights:
        x = (x @ weight.t()).relu()
    return (x,)


def test_the_fp64_run_of_a_graph_widens_each_input_as_it_is_first_read(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    x, weights = torch.randn(3, 4), [torch.randn(4, 4) for _ in range(6)]
    counts = _widenings(monkeypatch)
    gm = make_fx(layers)(x, *weights)
    copied = _copies_made(monkeypatch)
    outputs = references.fp64_outputs(gm, [x, *weights])
    assert outputs is not None and outputs[0].dtype == torch.float64
    expected = x.double()
    for weight in weights:
        expected = (expected @ weight.double().t()).relu()
    assert torch.equal(outputs[0], expected)
    # Each layer's widened weight is dropped once read: never more than two others are alive
    # (the widened activation and the weight just read), whatever the number of layers.
    assert len(counts) == 7 and max(counts) <= 2 and copied == []


def test_a_graph_that_writes_an_input_is_widened_up_front_as_before(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    x = torch.ones(4)
    gm = make_fx(scale_in_place)(x.clone())
    counts = _widenings(monkeypatch)
    outputs = references.fp64_outputs(gm, [x], mutated=[0])
    assert outputs is not None and torch.equal(
        outputs[1], torch.full((4,), 2.0, dtype=torch.float64)
    )
    assert torch.equal(x, torch.ones(4)) and counts == [0]


def test_the_eager_run_of_a_graph_that_writes_no_input_reads_the_inputs_themselves(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    x, weight = torch.randn(3, 4), torch.randn(5, 4)
    copied = _copies_made(monkeypatch)
    [output] = references.run_graph(make_fx(linear)(x, weight), [x, weight])
    assert torch.equal(output, x @ weight.t()) and copied == []
    # A graph that writes an input, or code that is no graph, runs on copies.
    y = torch.ones(4)
    references.run_graph(make_fx(scale_in_place)(y.clone()), [y])
    references.run_graph(linear, [x, weight])
    assert torch.equal(y, torch.ones(4)) and len(copied) == 3
