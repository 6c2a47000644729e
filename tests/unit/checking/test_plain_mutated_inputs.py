"""A plain ``torch.compile`` call that writes a wrong value into an argument fails its test: the
inputs a captured graph writes into are judged with its outputs, against the graph's eager and
fp64 runs."""

from __future__ import annotations

import torch

from pytest_torchcompile.checking.plain import GraphChecker
from pytest_torchcompile.common.verdict import DEFAULT_TOLERANCE
from pytest_torchcompile.judging.judge import mutated_input_path
from pytest_torchcompile.torch_internals.compiling import reset
from pytest_torchcompile.torch_internals.config import inductor_config

RELU_BUG = {"cpp.inject_relu_bug_TESTING_ONLY": "accuracy"}


def write_relu_into(dst: torch.Tensor, src: torch.Tensor) -> torch.Tensor:
    dst.copy_(torch.relu(src))
    return src * 2


def test_a_wrong_value_written_into_an_argument_is_caught() -> None:
    dst, src = torch.zeros(16), torch.linspace(-2, 2, 16)
    checker = GraphChecker(DEFAULT_TOLERANCE, check_non_float=True, intermediates=False)
    with inductor_config(RELU_BUG), checker.watching():
        torch.compile(write_relu_into)(dst, src)
    reset()
    [failure] = checker.tally.failures
    # dst is the graph's only input written into, whatever its position among the graph's inputs.
    [written] = [
        index for index, value in enumerate(failure.inputs) if torch.equal(value, torch.zeros(16))
    ]
    assert [leaf.path for leaf in failure.leaves if not leaf.passed] == [
        mutated_input_path(written)
    ]
