"""The fixture's training check, and the plain path's training calls, leave out the gradient
elements that depend on a NaN the forward computed (eager's kernels give them no one value:
``hardtanh``'s and ``elu``'s backward at a NaN differ between the vectorized body and the scalar
tail of their CPU kernels), and still fail a wrong gradient elsewhere."""

from __future__ import annotations

import math
from collections.abc import Callable

import pytest
import torch

from pytest_torchcompile.checking.model import check_model
from pytest_torchcompile.checking.plain import GraphChecker
from pytest_torchcompile.common.settings import CheckOptions
from pytest_torchcompile.common.verdict import DEFAULT_TOLERANCE, Status
from pytest_torchcompile.torch_internals.compiling import reset

LOG1P_BUG = {"cpp.inject_log1p_bug_TESTING_ONLY": "accuracy"}


def clipped(x: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.hardtanh(x % -3, -1, 2)


def elu(x: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.elu(x)


def scaled_log1p(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return torch.log1p(x) * w


def _with_nans(size: int = 65) -> torch.Tensor:
    """65 float32 elements: a vectorized body and a scalar tail on every CPU, a NaN in each."""
    x = torch.linspace(-0.9, 1.9, size)
    x[26] = x[64] = math.nan
    return x


@pytest.mark.parametrize("model", [clipped, elu])
def test_gradients_at_a_nan_input_pass(model: Callable[[torch.Tensor], torch.Tensor]) -> None:
    outcome = check_model(
        model, (_with_nans().requires_grad_(),), options=CheckOptions(backward=True)
    )
    assert outcome.status is Status.PASS, outcome.message


def test_a_wrong_gradient_beside_a_nan_still_fails() -> None:
    outcome = check_model(
        scaled_log1p,
        (_with_nans().requires_grad_(), torch.linspace(0.5, 1.5, 65).requires_grad_()),
        options=CheckOptions(backward=True, inductor_config=LOG1P_BUG),
    )
    assert outcome.status is Status.FAIL_ACCURACY, outcome.message
    assert outcome.comparison is not None
    failing = [leaf.path for leaf in outcome.comparison.failing]
    assert any(path.startswith("grad") for path in failing), failing


def test_a_plain_training_call_at_a_nan_input_passes() -> None:
    x = _with_nans().requires_grad_()
    checker = GraphChecker(DEFAULT_TOLERANCE, check_non_float=True, intermediates=False)
    reset()
    with checker.watching():
        torch.compile(clipped)(x).sum().backward()
    reset()
    assert checker.tally.failures == [] and checker.tally.unchecked == []


def adaptive_max_pooled(x: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.adaptive_max_pool2d(x, 2)


def test_gradients_wrong_through_saved_indices_name_the_forward_graph_non_floating() -> None:
    """Inductor's ``adaptive_max_pool2d`` gives a window holding a NaN after its largest finite
    value that value's index, where eager gives the NaN's (its value is NaN in both): the
    gradient goes to the wrong element. The forward graph that fails alone is wrong only in the
    indices it saves, so its case is a non-floating failure, which its minifier judges."""
    torch.manual_seed(0)
    x = torch.randn(1, 4, 5, 5)
    x[0, 1, 2, 3] = math.nan
    _, eager = torch.nn.functional.adaptive_max_pool2d(x, 2, return_indices=True)
    reset()
    _, compiled = torch.compile(
        lambda t: torch.nn.functional.adaptive_max_pool2d(t, 2, return_indices=True)
    )(x)
    reset()
    if torch.equal(eager, compiled):
        pytest.skip("this torch gives the NaN's index compiled too")
    outcome = check_model(
        adaptive_max_pooled, (x.requires_grad_(),), options=CheckOptions(backward=True)
    )
    assert outcome.status is Status.FAIL_ACCURACY, outcome.message
    assert outcome.comparison is not None
    assert [leaf.path for leaf in outcome.comparison.failing] == ["grad['args[0]']"]
    [failing, *_] = outcome.failing_graphs
    assert failing.graph.kind == "forward" and failing.non_float_only
