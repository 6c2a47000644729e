"""The decomposed graphs run eagerly as a floor of a failing check: a decomposition that only
rounds otherwise lets compiled code be as far from fp64 as it is (up to the cap), a decomposition
that computes something else never does."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
import torch

from pytest_torchcompile.checking import floors as checking_floors
from pytest_torchcompile.checking import model as checking_model
from pytest_torchcompile.checking.model import check_model
from pytest_torchcompile.common.settings import CheckOptions
from pytest_torchcompile.common.verdict import Status

aten = torch.ops.aten
OPTIONS = CheckOptions(intermediates=False)


class SiluMinusInput(torch.nn.Module):
    """``silu(x) - x`` scaled: cancels to about 1e-4 of ``x`` for x in [10, 20], so the rounding
    of silu's value is most of the result's error and shows beyond the rule's allclose."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (torch.nn.functional.silu(x) - x) * 1e4


def inputs() -> torch.Tensor:
    return 10 + 10 * torch.rand(4000, generator=torch.Generator().manual_seed(0))


@pytest.fixture
def silu_decomposed_as() -> Iterator[Callable[[Callable[[torch.Tensor], torch.Tensor]], None]]:
    """Replace Inductor's decomposition of silu by ``change`` of its value, in this process."""
    from torch._inductor import decomposition
    from torch._inductor.decomposition import decompositions

    original = decompositions[aten.silu.default]

    def install(change: Callable[[torch.Tensor], torch.Tensor]) -> None:
        decompositions[aten.silu.default] = lambda x: change(original(x))
        _forget_derived_tables(decomposition)

    yield install
    decompositions[aten.silu.default] = original
    _forget_derived_tables(decomposition)


def _forget_derived_tables(decomposition: object) -> None:
    # Inductor caches a copy of the table with its random-op decompositions added.
    cached = getattr(decomposition, "fast_random_decomps", None)
    if cached is not None and hasattr(cached, "cache_clear"):
        cached.cache_clear()


def rounded_to_32(value: torch.Tensor) -> torch.Tensor:
    """The same value, rounded to a multiple of 32's last place: exact in fp64 (to 1e-14), about
    2.6 times eager's error in fp32 here."""
    return (value + 32.0) - 32.0


def test_a_decomposition_that_rounds_otherwise_passes_on_the_decomposed_floor(
    silu_decomposed_as: Callable[[Callable[[torch.Tensor], torch.Tensor]], None],
) -> None:
    silu_decomposed_as(rounded_to_32)

    outcome = check_model(SiluMinusInput(), (inputs(),), options=OPTIONS)

    assert outcome.status is Status.PASS, outcome.message
    (leaf,) = outcome.comparison.leaves
    assert leaf.rmse_compiled > 2 * leaf.rmse_eager, "the rule alone fails it"
    assert "Inductor's decomposed graphs run by eager kernels" in leaf.detail, leaf.detail
    assert "2.00x eager's" in leaf.detail, "the sample is capped at twice eager's error"


def test_the_cap_bounds_a_decomposition_far_noisier_than_eager(
    silu_decomposed_as: Callable[[Callable[[torch.Tensor], torch.Tensor]], None],
) -> None:
    """Right in fp64, but 4.8 times eager's error in fp32: more than the cap lets compiled code be.
    No floor the cap allows could pass it, so the decomposed graphs are not even run."""
    silu_decomposed_as(lambda value: (value + 64.0) - 64.0)

    outcome = check_model(SiluMinusInput(), (inputs(),), options=OPTIONS)

    assert outcome.status is Status.FAIL_ACCURACY
    assert "decomposed" not in outcome.comparison.leaves[0].detail


def test_a_wrong_decomposition_the_cap_would_let_pass_still_fails(
    silu_decomposed_as: Callable[[Callable[[torch.Tensor], torch.Tensor]], None],
) -> None:
    """Off by 1.2e-6, compiled code is 3.2 times eager's error, within the cap's 4; the decomposed
    graphs run in fp64 are as far off the fp64 reference, so they give no sample."""
    silu_decomposed_as(lambda value: value + 1.2e-6)

    outcome = check_model(SiluMinusInput(), (inputs(),), options=OPTIONS)

    assert outcome.status is Status.FAIL_ACCURACY
    (leaf,) = outcome.comparison.leaves
    assert 2 * leaf.rmse_eager < leaf.rmse_compiled < 4 * leaf.rmse_eager
    assert "decomposed" not in leaf.detail


class NormedMLP(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.norm = torch.nn.LayerNorm(16)
        self.proj = torch.nn.Linear(16, 16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self.proj(self.norm(x)))


def test_a_wrong_layer_norm_decomposition_still_fails_in_training(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Off by far more than the cap could excuse, so a check would not run the decomposed
    graphs at all; they are run here regardless (the gate held open), and give no floor."""
    from torch._inductor import decomposition
    from torch._inductor.decomposition import decompositions

    original = decompositions[aten.native_layer_norm.default]

    def wrong(*args: object, **kwargs: object) -> object:
        result = original(*args, **kwargs)
        return (result[0] * 1.001, *result[1:])

    monkeypatch.setitem(decompositions, aten.native_layer_norm.default, wrong)
    _forget_derived_tables(decomposition)
    asked: list[int] = []
    floors = checking_model.decomposed_floors
    monkeypatch.setattr(
        checking_model, "decomposed_floors", lambda *args: asked.append(1) or floors(*args)
    )
    monkeypatch.setattr(checking_model, "_capped_floors_could_pass", lambda *args: True)
    torch.manual_seed(0)
    try:
        outcome = check_model(
            NormedMLP(), (torch.randn(64, 16),), options=CheckOptions(backward=True)
        )
    finally:
        monkeypatch.undo()
        _forget_derived_tables(decomposition)

    assert outcome.status is Status.FAIL_ACCURACY
    assert asked, "the decomposed floor was tried"
    assert not any("decomposed" in leaf.detail for leaf in outcome.comparison.failing)


def test_a_passing_check_runs_no_decomposed_graphs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(
        checking_floors,
        "decomposed",
        lambda *args, **kwargs: pytest.fail("a passing check decomposed"),
    )

    assert check_model(SiluMinusInput(), (inputs(),), options=OPTIONS).status is Status.PASS


def test_the_decomposed_runs_leave_no_trace_in_dynamos_counters(
    silu_decomposed_as: Callable[[Callable[[torch.Tensor], torch.Tensor]], None],
) -> None:
    from torch._dynamo.utils import counters

    silu_decomposed_as(rounded_to_32)
    before = {key: dict(value) for key, value in counters.items()}

    assert check_model(SiluMinusInput(), (inputs(),), options=OPTIONS).status is Status.PASS
    assert {key: dict(value) for key, value in counters.items() if value} == {
        k: v for k, v in before.items() if v
    }
