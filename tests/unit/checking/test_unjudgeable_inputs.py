"""Inputs a check cannot judge: a tensor not laid out in strided memory, wherever it is."""

from __future__ import annotations

import pytest
import torch

from pytest_torchcompile.checking.runs import unjudgeable_input


def identity(*args: object, **kwargs: object) -> object:
    return args


def test_strided_inputs_and_subclasses_are_judged() -> None:
    assert (
        unjudgeable_input(
            identity, [torch.ones(2), torch.ones(2).as_subclass(torch.nn.Parameter)], {}
        )
        is None
    )


# torch's own notice on making the input, which the run's warnings summary would show.
@pytest.mark.filterwarnings("ignore:Sparse CSR tensor support is in beta")
def test_a_sparse_tensor_nested_in_a_keyword_argument_is_named() -> None:
    csr = torch.eye(2).to_sparse_csr()
    assert unjudgeable_input(identity, [torch.ones(2)], {"pair": (torch.ones(1), [csr])}) == (
        "kwargs['pair'] holds a tensor of layout torch.sparse_csr, which the check cannot compare; "
        "the model ran eagerly"
    )


def test_a_sparse_weight_of_the_model_is_named() -> None:
    model = torch.nn.Module()
    model.register_buffer("table", torch.eye(2).to_sparse())
    reason = unjudgeable_input(model, [torch.ones(2)], {})
    assert reason is not None and reason.startswith(
        "table holds a tensor of layout torch.sparse_coo"
    )


def test_a_meta_tensor_is_named() -> None:
    assert unjudgeable_input(identity, [torch.ones(2), torch.ones(2, device="meta")], {}) == (
        "args[1] holds a meta tensor, which holds no values to compare; the model ran eagerly"
    )
