"""The copies of a model a check makes live no longer than their run: each eager copy is gone
before the fp64 copy is made, the fp64 copy before the compiled copy is made, so that at most the
caller's model and the fp64 copy, or the caller's model, the compiled copy and one copy of a
graph's inputs, are alive at once. An fp64 copy that does not fit in memory leaves the check to
the labelled same-precision rule."""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any

import pytest
import torch

from pytest_torchcompile.checking import compiled, eager, floors, runs
from pytest_torchcompile.checking import model as checking
from pytest_torchcompile.checking.model import check_model
from pytest_torchcompile.common.settings import CheckOptions
from pytest_torchcompile.common.verdict import Status


def _mlp() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Tanh(), torch.nn.Linear(8, 4))


Copies = list[tuple[bool, list[weakref.ref[torch.Tensor]]]]


def _copies(monkeypatch: pytest.MonkeyPatch) -> Copies:
    """Every copy of the model the check makes: (fp64, weak references to its weights). The
    weights, not the module: an autograd graph keeps a copy's weights alive without it."""
    made: Copies = []
    original = runs.copy_callable

    def spy(fn: Callable[..., Any], fp64: bool = False) -> Callable[..., Any]:
        copy = original(fn, fp64)
        assert isinstance(copy, torch.nn.Module)
        made.append((fp64, [weakref.ref(weight) for weight in copy.parameters()]))
        return copy

    _copying_with(monkeypatch, spy)
    return made


def _copying_with(monkeypatch: pytest.MonkeyPatch, copier: Callable[..., Any]) -> None:
    """``copier`` in place of :func:`runs.copy_callable` wherever a check copies a model."""
    for module in (runs, eager, compiled, floors):
        monkeypatch.setattr(module, "copy_callable", copier)


def _alive(made: Copies, fp64: bool) -> int:
    return sum(any(ref() is not None for ref in refs) for wide, refs in made if wide is fp64)


@pytest.mark.parametrize("backward", [False, True])
def test_no_copy_is_alive_beside_the_fp64_one_and_only_the_compiled_one_outlives_its_run(
    monkeypatch: pytest.MonkeyPatch, backward: bool
) -> None:
    made = _copies(monkeypatch)
    seen: dict[str, tuple[int, int]] = {}

    def noting(name: str, step: Callable[..., Any]) -> Callable[..., Any]:
        def run(*args: Any, **kwargs: Any) -> Any:
            seen[name] = (_alive(made, False), _alive(made, True))
            return step(*args, **kwargs)

        return run

    monkeypatch.setattr(checking, "fp64_reference", noting("fp64 run", checking.fp64_reference))
    monkeypatch.setattr(checking, "masked_deviation", noting("probe", checking.masked_deviation))
    outcome = check_model(_mlp(), [torch.randn(3, 8)], options=CheckOptions(backward=backward))
    assert outcome.status is Status.PASS, outcome.message
    # Two eager runs came before the fp64 run, none of them left; the compiled copy came after it,
    # and is the only one left for the probe.
    assert len(made) == 4 and [wide for wide, _ in made] == [False, False, True, False]
    assert seen == {"fp64 run": (0, 0), "probe": (1, 0)}


def test_an_fp64_copy_that_does_not_fit_leaves_the_same_precision_check(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    original = runs.copy_callable

    def no_room_in_fp64(fn: Callable[..., Any], fp64: bool = False) -> Callable[..., Any]:
        if fp64:
            raise MemoryError("no room")
        return original(fn, fp64)

    _copying_with(monkeypatch, no_room_in_fp64)
    outcome = check_model(_mlp(), [torch.randn(3, 8)])
    assert outcome.status is Status.NO_FP64_REFERENCE and outcome.passed
    assert outcome.reference == (
        "same-precision cosine check: the fp64 reference does not fit in memory: the "
        f"model's weights and inputs alone take {(8 * 8 + 8 + 8 * 4 + 4 + 3 * 8) * 8 / 2**30:.2f} "
        "GiB in fp64 (MemoryError: no room)"
    )
    assert outcome.comparison is not None and [
        leaf.passed for leaf in outcome.comparison.leaves
    ] == [True]


def test_the_fp64_copy_keeps_tied_weights_tied_and_the_callers_in_fp32() -> None:
    model = torch.nn.Sequential(torch.nn.Embedding(5, 4), torch.nn.Linear(4, 5, bias=False))
    model[1].weight = model[0].weight
    wide = runs.copy_callable(model, fp64=True)
    assert isinstance(wide, torch.nn.Sequential) and wide[0].weight is wide[1].weight
    assert wide[0].weight.dtype == torch.float64 and isinstance(wide[0].weight, torch.nn.Parameter)
    assert model[0].weight.dtype == torch.float32 and torch.equal(
        wide[0].weight, model[0].weight.double()
    )


@pytest.mark.parametrize("steps", [0, 1])
def test_the_compiled_calls_record_the_callers_weights_unless_an_optimizer_steps(
    steps: int,
) -> None:
    model = _mlp()
    outcome = check_model(
        model, [torch.randn(3, 8)], options=CheckOptions(steps=steps, intermediates=False)
    )
    assert outcome.status is Status.PASS, outcome.message
    weights = {weight.untyped_storage().data_ptr() for weight in model.parameters()}
    recorded = [
        value
        for graph in outcome.graphs
        if graph.kind != "backward"
        for call in graph.calls
        for value in call
        if isinstance(value, torch.Tensor)
    ]
    shared = [value for value in recorded if value.untyped_storage().data_ptr() in weights]
    assert len(shared) == (4 if not steps else 0)
