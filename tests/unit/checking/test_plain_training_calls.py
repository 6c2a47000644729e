"""A training call of plain ``torch.compile`` that a backward followed is judged end to end: the
compiled forward and backward run again on copies of the call's inputs, its gradients
against eager's forward and backward of the torch-level graph; a backward bug that no post-AOT
graph shows on its own fails the test, a training model without a bug does not, the test's own
tensors, buffers and generators are left as a call without the plugin leaves them, and a call
no backward followed gets no backward."""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Iterator

import pytest
import torch
from models import ReluInBackward

from pytest_torchcompile.checking.plain import GraphChecker
from pytest_torchcompile.checking.torch_level import TRAINING_NOTE
from pytest_torchcompile.common.verdict import DEFAULT_TOLERANCE
from pytest_torchcompile.torch_internals.compiling import reset
from pytest_torchcompile.torch_internals.config import inductor_config

RELU_BUG = {"cpp.inject_relu_bug_TESTING_ONLY": "accuracy"}

# Tagged flexible_layout: Inductor hands the ops its own layout of a tensor, as it does to aten's
# fallback kernels, rather than the layout traced from eager.
_LIBRARY = "pytest_torchcompile_training_calls"


@torch.library.custom_op(
    f"{_LIBRARY}::scale_by", mutates_args=(), tags=(torch.Tag.flexible_layout,)
)
def scale_by(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return x * w


@scale_by.register_fake
def _(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return torch.empty_like(x)


@torch.library.custom_op(
    f"{_LIBRARY}::scale_by_backward", mutates_args=(), tags=(torch.Tag.flexible_layout,)
)
def scale_by_backward(grad: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """Wrong where ``w`` is not channels-last, as eager's ``cat`` of channels-last tensors lays
    it out: it reads ``w``'s storage in that layout (as #197888's kernel reads indices as
    contiguous). Inductor saves its ``cat`` contiguous."""
    return grad * torch.as_strided(
        w, w.shape, w.contiguous(memory_format=torch.channels_last).stride()
    )


@scale_by_backward.register_fake
def _(grad: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return torch.empty_like(grad)


def _save_weight(
    ctx: torch.autograd.function.FunctionCtx,
    inputs: tuple[torch.Tensor, torch.Tensor],
    output: torch.Tensor,
) -> None:
    ctx.save_for_backward(inputs[1])


def _scale_by_grad(
    ctx: torch.autograd.function.FunctionCtx, grad: torch.Tensor
) -> tuple[torch.Tensor, None]:
    (w,) = ctx.saved_tensors  # type: ignore[attr-defined]
    return scale_by_backward(grad, w), None


scale_by.register_autograd(_scale_by_grad, setup_context=_save_weight)


def scaled_by_cat(x: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    return scale_by(x, torch.cat([v, v], 1))


def _inputs() -> tuple[torch.Tensor, torch.Tensor]:
    torch.manual_seed(0)
    x = torch.randn(2, 6, 5, 7, requires_grad=True)
    return x, torch.randn(2, 3, 5, 7).contiguous(memory_format=torch.channels_last)


def _compiled_gradient() -> torch.Tensor:
    """x's gradient from one compiled forward and backward, the plugin not watching."""
    x, v = _inputs()
    reset()
    torch.compile(scaled_by_cat)(x, v).sum().backward()
    reset()
    assert x.grad is not None
    return x.grad


def test_a_backward_that_misreads_what_the_compiled_forward_saved_is_caught() -> None:
    x, v = _inputs()
    eager = torch.autograd.grad(scaled_by_cat(x, v).sum(), x)[0]
    compiled = _compiled_gradient()
    assert not torch.allclose(compiled, eager), "the injected backward bug no longer shows"

    x, v = _inputs()
    generator = torch.get_rng_state()
    checker = GraphChecker(DEFAULT_TOLERANCE, check_non_float=True, intermediates=False)
    with checker.watching():
        torch.compile(scaled_by_cat)(x, v).sum().backward()
    reset()

    # Each post-AOT graph, judged on its own, passes: only forward and backward together fail.
    assert sorted(checker.tally.judged) == [0, 1] and not any(checker.tally.judged.values())
    [torch_level] = checker.capture.dynamo_graphs
    assert [graph.kind for graph in torch_level.lowered] == ["forward", "backward"]
    [failure] = checker.tally.failures
    assert failure.dynamo is not None and failure.note == TRAINING_NOTE
    assert [leaf.path for leaf in failure.leaves if not leaf.passed] == ["grad of L_x_"]
    assert failure.message.startswith("1 of 1 gradients of torch-level graph 0")
    # The judgement ran on copies: x holds the one gradient of the test's own backward.
    assert x.grad is not None and torch.equal(x.grad, compiled)
    assert torch.equal(torch.get_rng_state(), generator)


def test_a_call_no_backward_followed_gets_no_backward() -> None:
    x, v = _inputs()
    checker = GraphChecker(DEFAULT_TOLERANCE, check_non_float=True, intermediates=False)
    with checker.watching():
        torch.compile(scaled_by_cat)(x, v)
    reset()
    assert checker.tally.failures == [] and [graph.kind for graph in checker.capture.graphs] == [
        "forward"
    ]


def test_a_backward_graph_failing_on_its_own_is_reported_once() -> None:
    """As the post-AOT graph it is: the training call it belongs to is not judged again."""
    x = torch.linspace(-2, 2, 16, requires_grad=True)
    checker = GraphChecker(DEFAULT_TOLERANCE, check_non_float=True, intermediates=False)
    with inductor_config(RELU_BUG), checker.watching():
        torch.compile(lambda x: ReluInBackward.apply(x).sin())(x).sum().backward()
    reset()
    [failure] = checker.tally.failures
    assert failure.graph.kind == "backward" and failure.dynamo is None


class ConvNet(torch.nn.Module):
    def __init__(self, dropout: bool) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.norm = torch.nn.BatchNorm2d(8)
        self.dropout = torch.nn.Dropout(0.3) if dropout else torch.nn.Identity()
        self.head = torch.nn.Linear(8, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        features = self.dropout(torch.relu(self.norm(self.conv(x))))
        return self.head(features.mean((2, 3)))


def _train_step(
    model: torch.nn.Module, x: torch.Tensor, checker: GraphChecker | None = None
) -> None:
    reset()
    torch.manual_seed(1)
    with checker.watching() if checker is not None else contextlib.nullcontext():
        torch.compile(model)(x).sum().backward()
    reset()


def _model_and_input(dropout: bool) -> tuple[ConvNet, torch.Tensor]:
    torch.manual_seed(0)
    return ConvNet(dropout), torch.randn(4, 3, 8, 8, requires_grad=True)


def test_a_training_model_without_a_bug_passes_judged_on_copies() -> None:
    model, x = _model_and_input(dropout=False)
    unwatched, x_unwatched = copy.deepcopy(model), x.detach().clone().requires_grad_()
    _train_step(unwatched, x_unwatched)
    generator = torch.get_rng_state()

    checker = GraphChecker(DEFAULT_TOLERANCE, check_non_float=True, intermediates=False)
    _train_step(model, x, checker)

    assert checker.tally.failures == [] and checker.tally.unchecked == []
    assert [graph.judgeable() for graph in checker.capture.dynamo_graphs] == [True]
    # One step's effect, as without the plugin: the running statistics updated once, one gradient
    # in each parameter and in x, the generator untouched.
    for (name, value), expected in zip(
        model.state_dict().items(), unwatched.state_dict().values(), strict=True
    ):
        assert torch.equal(value, expected), name
    for (name, parameter), expected in zip(
        model.named_parameters(), unwatched.parameters(), strict=True
    ):
        assert parameter.grad is not None and expected.grad is not None
        assert torch.equal(parameter.grad, expected.grad), name
    assert (
        x.grad is not None
        and x_unwatched.grad is not None
        and torch.equal(x.grad, x_unwatched.grad)
    )
    assert torch.equal(torch.get_rng_state(), generator)


def test_a_training_model_with_dropout_passes() -> None:
    """Its graphs draw random numbers: judged per graph, with eager's draws, as before."""
    model, x = _model_and_input(dropout=True)
    checker = GraphChecker(DEFAULT_TOLERANCE, check_non_float=True, intermediates=False)
    _train_step(model, x, checker)
    assert checker.tally.failures == [] and checker.tally.unchecked == []
    assert sorted(checker.tally.judged) == [0, 1]


def test_gradients_that_cancel_to_nearly_zero_are_no_failure() -> None:
    """A convolution's bias before batch norm has a gradient of nearly zero, rounding noise; the
    decomposed backward's is larger than eager's native kernel's. Judged as a loss of the outputs'
    means (PyTorch's accuracy runs' loss), not their sums, it stays within the rule's slack."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, 16, 3, padding=1),
        torch.nn.BatchNorm2d(16),
        torch.nn.ReLU(),
        torch.nn.Conv2d(16, 16, 3, padding=1),
        torch.nn.BatchNorm2d(16),
        torch.nn.ReLU(),
    )
    checker = GraphChecker(DEFAULT_TOLERANCE, check_non_float=True, intermediates=False)
    reset()
    with checker.watching():
        torch.compile(model)(torch.randn(8, 3, 16, 16)).mean().backward()
    reset()
    assert checker.tally.failures == [] and checker.tally.unchecked == []
    assert [graph.judgeable() for graph in checker.capture.dynamo_graphs] == [True]


def test_gradients_judged_without_an_fp64_reference_name_the_rule_they_failed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from pytest_torchcompile.judging import references

    @contextlib.contextmanager
    def no_room() -> Iterator[None]:
        raise torch.OutOfMemoryError("out of memory: tried to allocate 64.00 GiB")
        yield

    monkeypatch.setattr(references, "float64_everywhere", no_room)
    x, v = _inputs()
    checker = GraphChecker(DEFAULT_TOLERANCE, check_non_float=True, intermediates=False)
    with checker.watching():
        torch.compile(scaled_by_cat)(x, v).sum().backward()
    reset()

    [failure] = checker.tally.failures
    assert failure.note == TRAINING_NOTE and failure.reference != "fp64"
    assert "deviate beyond the cosine check (its compiled forward and backward" in failure.message
