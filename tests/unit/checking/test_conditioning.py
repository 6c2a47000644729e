"""An output that a rounding-sized change of the inputs and weights moves far (a jump across a tie:
max pooling, a ReLU's edge, a floor) is measured against eager on nudged inputs and weights: compiled
code that rounds otherwise and lands across the tie passes or is inconclusive, a wrong result
beyond that still fails."""

from __future__ import annotations

import math
from collections.abc import Iterator

import pytest
import torch
from torch._inductor import config, lowering

from pytest_torchcompile.checking.eager import EagerRuns
from pytest_torchcompile.checking.floors import EAGER_SPREAD_FLOOR
from pytest_torchcompile.checking.graph_calls import CallJudgement
from pytest_torchcompile.checking.model import check_model
from pytest_torchcompile.checking.plain import GraphChecker
from pytest_torchcompile.common.leaves import LeafResult, LeafRule
from pytest_torchcompile.common.settings import CheckOptions
from pytest_torchcompile.common.verdict import DEFAULT_TOLERANCE, Comparison, Status
from pytest_torchcompile.judging.conditioning import (
    DISCONTINUITY_CAP,
    judged_discontinuous,
    nudged,
)
from pytest_torchcompile.torch_internals.compiling import reset

aten = torch.ops.aten


@pytest.fixture
def scaled_mul(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[float]]:
    """Inductor's lowering of ``mul`` scaled by the factor the test puts in the list, as a
    lowering mutant is; Inductor's graph cache off, whose key does not see a patched lowering."""
    factor: list[float] = []
    original = lowering.lowerings[aten.mul.Tensor]
    monkeypatch.setitem(
        lowering.lowerings,
        aten.mul.Tensor,
        lambda *args, **kwargs: original(original(*args, **kwargs), factor[0]),
    )
    with config.patch(fx_graph_cache=False):
        yield factor


def _at_ties() -> torch.Tensor:
    """Halves of integers, one in 32 exactly on the integer (``floor(2 x)`` jumps there), the rest
    0.15 above: eager and fp64 agree exactly."""
    offset = torch.full((512,), 0.3)
    offset[::32] = 0.0
    return (torch.arange(512, dtype=torch.float32) + offset) / 2


def _floor(x: torch.Tensor) -> torch.Tensor:
    return torch.floor(x * 2.0)


def test_compiled_rounding_across_a_tie_is_within_the_outputs_conditioning(
    scaled_mul: list[float],
) -> None:
    scaled_mul.append(1 - 2e-7)  # about one unit in the last place of float32
    outcome = check_model(_floor, (_at_ties(),), options=CheckOptions(intermediates=False))
    assert outcome.passed, outcome.message
    (leaf,) = outcome.comparison.leaves
    assert leaf.rmse_eager == 0.0 and leaf.rmse_compiled > 0.0
    assert "nudged by a unit in the last place" in leaf.detail
    assert "where eager's is 0" in leaf.detail


def test_a_wrong_result_beyond_the_conditioning_still_fails(scaled_mul: list[float]) -> None:
    scaled_mul.append(1.01)
    outcome = check_model(_floor, (_at_ties(),), options=CheckOptions(intermediates=False))
    assert outcome.status is Status.FAIL_ACCURACY, outcome.message


def _plain_failures(factor: float) -> list[str]:
    """The messages of a plain ``torch.compile`` call's failing graphs at the ties."""
    checker = GraphChecker(DEFAULT_TOLERANCE, check_non_float=True, intermediates=False)
    with checker.watching():
        torch.compile(_floor)(_at_ties())
    reset()
    return [failure.message for failure in checker.tally.failures]


def test_a_plain_call_rounding_across_a_tie_is_within_the_outputs_conditioning(
    scaled_mul: list[float],
) -> None:
    scaled_mul.append(1 - 2e-7)
    assert _plain_failures(1 - 2e-7) == []


def test_a_plain_calls_wrong_result_beyond_the_conditioning_still_fails(
    scaled_mul: list[float],
) -> None:
    scaled_mul.append(1.01)
    assert [message.split(" from ")[0] for message in _plain_failures(1.01)] == [
        "1 of 1 outputs of graph 0 (inference)"
    ]


class _Jittering:
    """An eager computation that disagrees with itself from run to run, as atomic adds on a GPU
    do: its second call is off by 1e-3."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, x: torch.Tensor) -> tuple[torch.Tensor]:
        self.calls += 1
        return (x * 2 + (1e-3 if self.calls == 2 else 0.0),)


def _judgement(module: _Jittering, x: torch.Tensor) -> CallJudgement:
    eager = list(module(x))
    return CallJudgement(
        module, [x], False, [], eager, [x.double() * 2], "out", DEFAULT_TOLERANCE, True, None
    )


def test_a_plain_graph_within_eagers_own_spread_passes() -> None:
    x = torch.linspace(-1, 1, 64)
    judgement = _judgement(_Jittering(), x)
    compiled = [x * 2 + 1e-3]
    (first,) = judgement(compiled)
    assert not first.passed
    (leaf,) = judgement.measured(compiled)
    assert leaf.passed, leaf.detail
    assert judgement.deciding == {"out[0]": EAGER_SPREAD_FLOOR}
    # Another run of the compiled code is judged with the spread found.
    (again,) = judgement(compiled)
    assert again.passed


def test_a_plain_graph_beyond_eagers_own_spread_fails() -> None:
    x = torch.linspace(-1, 1, 64)
    (leaf,) = _judgement(_Jittering(), x).measured([x * 2 + 1.0])
    assert not leaf.passed


class _Rotary(torch.nn.Module):
    """RoPE-like: a buffer of frequencies times positions, which a nudge of the buffer moves by
    the position (far beyond any rounding), beside a weight."""

    def __init__(self) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(8))
        self.register_buffer("inv_freq", torch.linspace(0.1, 1.0, 8))

    def forward(self, positions: torch.Tensor) -> torch.Tensor:
        return torch.sin(positions[:, None] * self.inv_freq) * self.weight


def test_a_nudged_run_moves_the_inputs_and_weights_but_not_the_buffers() -> None:
    model, positions = _Rotary(), torch.arange(64, dtype=torch.float32) * 100
    seen: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = []

    def record(module: torch.nn.Module, args: tuple[torch.Tensor]) -> None:
        seen.append((args[0].clone(), module.weight.detach().clone(), module.inv_freq.clone()))

    model.register_forward_pre_hook(record)  # kept by the run's copy of the model
    eager = EagerRuns(model, CheckOptions(intermediates=False))
    eager.run(((positions,), {}), nudged=1)
    ((x, weight, inv_freq),) = seen
    assert not torch.equal(x, positions) and not torch.equal(weight, torch.ones(8))
    assert torch.equal(inv_freq, torch.linspace(0.1, 1.0, 8))


def _leaf(compiled: float) -> LeafResult:
    return LeafResult(
        "grad['bias']", (64,), "torch.float32", False, "fp64 rmse", compiled, 3.6e-6, 3
    )


def test_a_discontinuous_output_within_the_cap_is_inconclusive() -> None:
    nudged = 4.9e-4  # hgnetv2_b0's bias gradient: eager 3.6e-6, compiled 1.9e-3
    (within,) = judged_discontinuous(Comparison([_leaf(1.9e-3)]), {"grad['bias']": nudged}).leaves
    assert (
        within.passed and within.rule == LeafRule.INCONCLUSIVE and "discontinuous" in within.detail
    )
    (beyond,) = judged_discontinuous(
        Comparison([_leaf(DISCONTINUITY_CAP * nudged * 1.01)]), {"grad['bias']": nudged}
    ).leaves
    assert not beyond.passed and beyond.rule == "fp64 rmse"
    (other,) = judged_discontinuous(Comparison([_leaf(1.9e-3)]), {"grad['weight']": nudged}).leaves
    assert not other.passed


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.float64])
def test_nudging_moves_each_element_by_about_a_unit_in_the_last_place(dtype: torch.dtype) -> None:
    value = (torch.randn(1000, dtype=torch.float64) * 100).to(dtype).requires_grad_()
    moved = nudged(value, torch.Generator().manual_seed(1))
    assert moved.dtype == dtype and moved.requires_grad and moved.is_leaf
    change = (moved.detach().double() - value.detach().double()).abs()
    spacing = value.detach().double().abs() * torch.finfo(dtype).eps
    assert bool((change <= 2 * spacing).all()) and float((change > 0).double().mean()) > 0.9
    up = float((moved.detach().double().abs() > value.detach().double().abs()).double().mean())
    assert math.isclose(up, 0.5, abs_tol=0.1)
    assert nudged(torch.arange(4), torch.Generator()).equal(torch.arange(4))
