"""check_model on small models: real Inductor compiles on the CPU."""

from __future__ import annotations

import collections
import math

import pytest
import torch

from pytest_torchcompile.checking.eager import Baseline, EagerRuns, eager_baseline
from pytest_torchcompile.checking.model import check_model
from pytest_torchcompile.checking.outcome import EagerRunError
from pytest_torchcompile.common.settings import CheckOptions
from pytest_torchcompile.common.verdict import DEFAULT_TOLERANCE, TRAINING_TOLERANCE, Status

RELU_BUG = {"cpp.inject_relu_bug_TESTING_ONLY": "accuracy"}
Heads = collections.namedtuple("Heads", ["logits", "labels"])


class Nested(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(8, 4)

    def forward(self, x: torch.Tensor) -> tuple:
        logits = self.linear(x).relu()
        return (
            logits.sum(),
            [Heads(logits, logits.argmax(-1))],
            {"mask": logits > 0, "nan": torch.log(x - 10)},
        )


def test_nested_int_bool_and_nan_outputs_pass() -> None:
    torch.manual_seed(0)
    outcome = check_model(Nested().eval(), (torch.randn(4, 8),))
    assert outcome.status is Status.PASS, outcome.message
    paths = [leaf.path for leaf in outcome.comparison.leaves]
    assert paths == [
        "out[0]",
        "out[1][0].logits",
        "out[1][0].labels",
        "out[2]['mask']",
        "out[2]['nan']",
    ]


def test_relu_bug_is_caught_on_nested_outputs() -> None:
    torch.manual_seed(0)
    outcome = check_model(
        Nested().eval(), (torch.randn(4, 8),), options=CheckOptions(inductor_config=RELU_BUG)
    )
    assert outcome.status is Status.FAIL_ACCURACY
    failing = {leaf.path for leaf in outcome.comparison.failing}
    assert "out[1][0].logits" in failing
    assert outcome.failing_graphs and outcome.failing_graphs[0].inputs is not None


def test_fp16_upcast_in_compiled_code_is_not_a_failure() -> None:
    def fn(x: torch.Tensor) -> torch.Tensor:
        return x - torch.tensor(655, dtype=torch.float16) * 100

    outcome = check_model(fn, (torch.tensor([65500.0] * 4, dtype=torch.float16),))
    assert outcome.status is Status.PASS, outcome.message


def test_dropout_in_train_mode_is_judged_with_eagers_numbers() -> None:
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Dropout(0.5)).train()
    outcome = check_model(model, (torch.randn(16, 8),))
    assert outcome.status is Status.PASS, outcome.message
    assert outcome.fallback_random and "fallback_random=True" in outcome.message


def test_randomness_outside_the_seeded_generator_is_judged_against_eagers_spread() -> None:
    """Eager that no seeding or deterministic kernel makes agree with itself fails no test: its
    runs' spread is the noise compiled code is measured against."""
    generator = torch.Generator().manual_seed(0)

    def fn(x: torch.Tensor) -> torch.Tensor:
        return x + torch.rand(x.shape, generator=generator)

    outcome = check_model(fn, (torch.randn(16, 8),))
    assert outcome.status is Status.EAGER_NONDETERMINISTIC and outcome.passed
    assert "eager disagrees with itself" in outcome.message
    assert "within the spread of its runs" in outcome.message


def _jitter(generator: torch.Generator, scale: float) -> float:
    """Noise a nondeterministic kernel would add, gone under deterministic algorithms."""
    if torch.are_deterministic_algorithms_enabled():
        return 0.0
    return scale * float(torch.rand((), generator=generator))


def test_a_random_model_whose_kernels_disagree_is_run_with_deterministic_kernels() -> None:
    """Dropout and a kernel whose order changes from run to run (cuDNN's convolution backward,
    torchvision's deeplabv3 in training): the generators are seeded alike, so deterministic
    kernels settle it, random draws or not."""
    generator = torch.Generator().manual_seed(0)
    dropout = torch.nn.Dropout(0.5).train()

    def fn(x: torch.Tensor) -> torch.Tensor:
        return dropout(x) * 2 + _jitter(generator, 1.0)

    outcome = check_model(fn, (torch.randn(16, 8),), options=CheckOptions(intermediates=False))
    assert outcome.status is Status.PASS, outcome.message


def test_eagers_spread_hides_no_deviation_beyond_it() -> None:
    generator = torch.Generator().manual_seed(0)

    def fn(x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x) + float(torch.rand((), generator=generator)) * 1e-2

    outcome = check_model(
        fn,
        (torch.linspace(-2, 2, 64),),
        options=CheckOptions(inductor_config=RELU_BUG, intermediates=False),
    )
    assert outcome.status is Status.FAIL_ACCURACY, outcome.message
    assert "eager disagrees with itself" in outcome.message and "was counted" in outcome.message


def test_eager_disagreeing_with_itself_is_run_again_with_deterministic_kernels() -> None:
    """A GPU convolution's weight gradient accumulates in an order that changes from run to run
    (inception_v3 in training): eager with deterministic kernels is the baseline then."""
    generator = torch.Generator().manual_seed(0)

    def fn(x: torch.Tensor) -> torch.Tensor:
        jitter = (
            0.0 if torch.backends.cudnn.deterministic else float(torch.rand(1, generator=generator))
        )
        return x * 2 + jitter

    options = CheckOptions()
    runs = EagerRuns(fn, options)
    baseline = eager_baseline(runs, ((torch.ones(4),), {}), options)
    assert isinstance(baseline, Baseline) and runs.deterministic
    assert torch.equal(baseline.parts["out"], torch.full((4,), 2.0))
    assert (
        torch.backends.cudnn.deterministic is False
        and not torch.are_deterministic_algorithms_enabled()
    )


def test_a_check_leaves_the_callers_random_stream_alone() -> None:
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Dropout(0.5)).train()
    torch.manual_seed(123)
    check_model(model, (torch.randn(16, 8),))
    after_check = torch.rand(4)
    torch.manual_seed(123)
    torch.randn(16, 8)
    assert torch.equal(after_check, torch.rand(4))


def test_in_place_mutation_of_input_is_checked_and_caller_tensor_untouched() -> None:
    def fn(x: torch.Tensor) -> torch.Tensor:
        x.mul_(2).relu_()
        return x.sum(0)

    x = torch.randn(4, 8)
    before = x.clone()
    outcome = check_model(fn, (x,))
    assert outcome.status is Status.PASS, outcome.message
    assert torch.equal(x, before)
    assert "args[0] (mutated in place)" in [leaf.path for leaf in outcome.comparison.leaves]
    broken = check_model(fn, (x,), options=CheckOptions(inductor_config=RELU_BUG))
    assert broken.status is Status.FAIL_ACCURACY
    assert "args[0] (mutated in place)" in [leaf.path for leaf in broken.comparison.failing]


class Float32Only(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dtype != torch.float32:
            raise TypeError("this model only supports float32")
        return self.linear(x).tanh()


def test_model_that_cannot_run_in_fp64_gets_labelled_weaker_check() -> None:
    outcome = check_model(Float32Only(), (torch.randn(4, 8),))
    assert outcome.status is Status.NO_FP64_REFERENCE
    assert outcome.passed
    assert "cannot run in fp64" in outcome.reference
    assert all(
        "cosine" in leaf.rule or leaf.rule == "allclose" for leaf in outcome.comparison.leaves
    )


class WithBuffers(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.bn = torch.nn.BatchNorm1d(8)
        self.register_buffer("scale", torch.linspace(0.5, 2.0, 8))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        offset = torch.tensor([0.25, -0.5, 1.0, 0.0, 0.5, -1.0, 2.0, 0.125])
        return torch.relu(self.bn(x) * self.scale + offset)


def test_buffers_and_constants_train_mode_model_untouched() -> None:
    model = WithBuffers().train()
    running_mean = model.bn.running_mean.clone()
    outcome = check_model(model, (torch.randn(16, 8),))
    assert outcome.status is Status.PASS, outcome.message
    assert torch.equal(model.bn.running_mean, running_mean)
    broken = check_model(
        model, (torch.randn(16, 8),), options=CheckOptions(inductor_config=RELU_BUG)
    )
    assert broken.status is Status.FAIL_ACCURACY


def test_dtype_inside_model_is_widened_for_the_reference() -> None:
    def fn(x: torch.Tensor) -> torch.Tensor:
        return (x.float() * 3).to(torch.float16).float() + torch.ones(x.shape, dtype=torch.float32)

    outcome = check_model(fn, (torch.randn(64, 64),))
    assert outcome.status is Status.PASS, outcome.message


def test_eager_exception_is_an_error_of_the_test() -> None:
    def fn(x: torch.Tensor) -> torch.Tensor:
        raise ValueError("broken model")

    with pytest.raises(EagerRunError, match="broken model"):
        check_model(fn, (torch.randn(2),))


@pytest.mark.parametrize(
    ("bug", "status"),
    [("compile_error", Status.FAIL_COMPILE), ("runtime_error", Status.FAIL_RUNTIME)],
)
def test_compiler_errors_have_their_own_statuses(bug: str, status: Status) -> None:
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU())
    outcome = check_model(
        model,
        (torch.randn(2, 4),),
        options=CheckOptions(inductor_config={"cpp.inject_relu_bug_TESTING_ONLY": bug}),
    )
    assert outcome.status is status
    assert outcome.failing_graphs


class AuxiliaryHead(torch.nn.Module):
    """GoogLeNet in train mode: a head whose output the loss leaves out, whose parameters get no
    gradient eagerly and zeros compiled."""

    def __init__(self) -> None:
        super().__init__()
        self.body, self.aux = torch.nn.Linear(8, 4), torch.nn.Linear(8, 4)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.body(x).relu(), self.aux(x)


def _first_output(out: tuple[torch.Tensor, ...]) -> torch.Tensor:
    return out[0].sum()


def test_no_gradient_and_a_zero_gradient_are_one() -> None:
    torch.manual_seed(0)
    outcome = check_model(
        AuxiliaryHead(),
        (torch.randn(4, 8),),
        options=CheckOptions(backward=True, loss_fn=_first_output),
    )
    assert outcome.status is Status.PASS, outcome.message
    paths = {leaf.path for leaf in outcome.comparison.leaves}
    assert {"grad['aux.weight']", "grad['body.weight']"} <= paths


def test_a_wrong_gradient_beside_an_unused_head_still_fails() -> None:
    torch.manual_seed(0)
    outcome = check_model(
        AuxiliaryHead(),
        (torch.randn(4, 8),),
        options=CheckOptions(backward=True, loss_fn=_first_output, inductor_config=RELU_BUG),
    )
    assert outcome.status is Status.FAIL_ACCURACY
    assert "grad['body.weight']" in {leaf.path for leaf in outcome.comparison.failing}


def test_training_checks_default_to_pytorchs_training_tolerance() -> None:
    assert CheckOptions().tolerance == DEFAULT_TOLERANCE
    assert (
        CheckOptions(backward=True).tolerance
        == CheckOptions(steps=2).tolerance
        == TRAINING_TOLERANCE
    )
    assert CheckOptions(backward=True, tol=1e-5).tolerance == 1e-5


def test_compiled_code_that_keeps_fp64s_infinity_where_eagers_fp16_sum_underflowed_passes() -> None:
    """A drawn program of the hunt: eager adds an fp16 0 and a bf16 1e-12 in fp16, where the sum
    underflows to 0 and ``where`` takes ``zero``; compiled code adds in fp32 and takes the
    infinity, as the fp64 run does. Compiled code is the one right here."""

    def program(a: torch.Tensor, b: torch.Tensor, r: torch.Tensor) -> torch.Tensor:
        return torch.where(a + b == 0, torch.zeros_like(r), r)

    a = torch.tensor([0.0], dtype=torch.float16)
    b = torch.tensor(1.02e-12, dtype=torch.bfloat16)
    r = torch.tensor([math.inf], dtype=torch.float16)
    assert float(program(a, b, r)) == 0.0
    outcome = check_model(program, (a, b, r))
    assert outcome.status is Status.PASS, outcome.message
