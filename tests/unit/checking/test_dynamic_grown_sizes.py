"""``dynamic=True`` judges a model at batch sizes the check chooses (2n+1, 4n+3): where eager
itself raises at one of them (a model that takes one batch size), that size is not judged and the
check says so; it was ``fail_compile``, as if Inductor had raised."""

from __future__ import annotations

import pytest
import torch

from pytest_torchcompile.checking.model import check_model
from pytest_torchcompile.checking.outcome import EagerRunError
from pytest_torchcompile.common.settings import CheckOptions
from pytest_torchcompile.common.verdict import Status


def one_batch_size(x: torch.Tensor) -> torch.Tensor:
    return x.view(4, 2, 2).sum(0)


def test_a_grown_size_eager_raises_at_is_not_judged_and_named() -> None:
    outcome = check_model(one_batch_size, (torch.randn(4, 4),), options=CheckOptions(dynamic=True))
    assert outcome.status is Status.PASS, outcome.message
    assert outcome.message.startswith(
        "not judged at input sizes [[9, 4]], a batch size dynamic=True grows to: eager raises "
        "there (RuntimeError: shape '[4, 2, 2]' is invalid for input of size 36); "
        "not judged at input sizes [[19, 4]]"
    ), outcome.message


def test_a_size_the_test_gives_that_eager_raises_at_is_the_models_error() -> None:
    x = torch.randn(4, 4)
    with pytest.raises(EagerRunError, match=r"at input sizes \[\[3, 4\]\]: RuntimeError"):
        check_model(one_batch_size, (x,), options=CheckOptions(dynamic=True, sizes=[(x[:3],)]))
