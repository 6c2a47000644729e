"""A training call of plain ``torch.compile`` whose loss is wrong shows its wrong gradients too:
its forward graph's failure lists the gradients that its compiled forward and backward, judged
together against eager's, get wrong, as the fixture's check does."""

from __future__ import annotations

import torch
from models import ReluInBackward

from pytest_torchcompile.checking.plain import GraphChecker
from pytest_torchcompile.common.verdict import DEFAULT_TOLERANCE
from pytest_torchcompile.torch_internals.compiling import reset
from pytest_torchcompile.torch_internals.config import inductor_config

RELU_BUG = {"cpp.inject_relu_bug_TESTING_ONLY": "accuracy"}


def relu_matmul(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return torch.relu(x) @ w


def test_a_wrong_loss_shows_the_gradients_it_makes_wrong() -> None:
    torch.manual_seed(0)
    x, w = torch.randn(4, 8, requires_grad=True), torch.randn(8, 3, requires_grad=True)
    checker = GraphChecker(DEFAULT_TOLERANCE, check_non_float=True, intermediates=False)
    with inductor_config(RELU_BUG), checker.watching():
        torch.compile(relu_matmul)(x, w).sum().backward()
    reset()
    [failure] = checker.tally.failures
    assert failure.graph.kind == "forward" and failure.dynamo is None
    failing = [leaf.path for leaf in failure.leaves if not leaf.passed]
    assert failing[0] == "forward_out[0]"
    assert failing[-2:] == ["grad of L_x_", "grad of L_w_"]
    assert failure.message.endswith("; 2 of 2 results of its training call's backward deviate too")


def test_a_backward_failing_on_its_own_keeps_the_gradients_in_its_table() -> None:
    x = torch.linspace(-2, 2, 16, requires_grad=True)
    checker = GraphChecker(DEFAULT_TOLERANCE, check_non_float=True, intermediates=False)
    with inductor_config(RELU_BUG), checker.watching():
        torch.compile(lambda x: ReluInBackward.apply(torch.relu(x)).sin())(x).sum().backward()
    reset()
    assert [failure.graph.kind for failure in checker.tally.failures] == ["forward", "backward"]
    assert not any(
        leaf.path.startswith("grad of")
        for failure in checker.tally.failures
        for leaf in failure.leaves
    )
