"""What an fp64 reference run gets: the graph judge and the model check widen alike, through
every container a model's arguments come in."""

from __future__ import annotations

from typing import NamedTuple

import torch

from pytest_torchcompile.checking.model import check_model
from pytest_torchcompile.common.settings import CheckOptions
from pytest_torchcompile.judging.copies import widened
from pytest_torchcompile.judging.references import fp64_outputs


def test_a_complex_graph_input_is_widened_to_complex128_for_the_reference() -> None:
    x = torch.randn(8, dtype=torch.complex64)
    [output] = fp64_outputs(lambda value: [value * 2], [x]) or [None]
    assert output is not None and output.dtype == torch.complex128


def test_widening_keeps_grad_and_copies_other_tensors() -> None:
    x = torch.randn(3, requires_grad=True)
    index = torch.arange(3)
    assert widened(x).dtype == torch.float64 and widened(x).requires_grad
    assert torch.equal(widened(index), index) and widened(index) is not index
    assert widened(1.5) == 1.5


class Pair(NamedTuple):
    x: torch.Tensor
    y: torch.Tensor


def sum_of_products(pair: Pair) -> torch.Tensor:
    return (pair.x * pair.y).sum(-1)


def test_a_named_tuple_argument_is_widened_for_the_reference() -> None:
    # A tolerance below any rounding: the allclose shortcut does not pass it, the fp64 rule judges.
    pair = Pair(torch.randn(64, 256), torch.randn(64, 256))
    outcome = check_model(
        sum_of_products, (pair,), options=CheckOptions(tol=1e-12, intermediates=False)
    )
    assert outcome.reference == "fp64"
    [leaf] = outcome.comparison.leaves
    assert leaf.rmse_eager is not None and leaf.rmse_eager > 0, (
        "the reference ran in fp32: eager equals it"
    )
