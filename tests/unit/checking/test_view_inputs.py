"""A model or a plain ``torch.compile`` call given a conjugate or negative view (``z.conj()``,
``z.conj().imag``) is judged as its compiled code computes: a healthy one passes, where its copies
once lost their bits and it was judged against eager on the conjugated or negated values
(``unconfirmed``, a ratio of 1e8, a repro exiting 0), and a negative view that Inductor reads as
its memory holds fails, where it once passed."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch

from pytest_torchcompile.checking.model import check_model
from pytest_torchcompile.checking.plain import GraphChecker
from pytest_torchcompile.common.verdict import DEFAULT_TOLERANCE, Status
from pytest_torchcompile.torch_internals.compiling import reset


def affine(z: torch.Tensor) -> torch.Tensor:
    return z * 2 + 1


# The test's own compiles of complex ops: Inductor falls back to eager for them, and says so.
pytestmark = pytest.mark.filterwarnings(
    "ignore:Torchinductor does not support code generation for complex operators"
)


def _complex() -> torch.Tensor:
    return torch.complex(torch.linspace(-1, 1, 8), torch.linspace(1, 2, 8))


INPUTS: dict[str, Callable[[], torch.Tensor]] = {
    "conjugate": lambda: _complex().conj(),
    "negative, complex": lambda: torch._neg_view(_complex()),
    "negative, real": lambda: _complex().conj().imag,
}


def _compiled_right(x: torch.Tensor) -> bool:
    """Whether Inductor computes ``affine`` of ``x`` as eager does (torch 2.13 reads a real
    negative view's memory, its values negated)."""
    reset()
    try:
        return torch.allclose(torch.compile(affine, fullgraph=True)(x), affine(x))
    finally:
        reset()


@pytest.mark.parametrize("given", INPUTS)
def test_a_plain_compile_given_a_view_is_judged_as_its_compiled_code_computes(given: str) -> None:
    x = INPUTS[given]()
    right = _compiled_right(x)
    checker = GraphChecker(DEFAULT_TOLERANCE, check_non_float=True, intermediates=False)
    try:
        with checker.watching():
            torch.compile(affine, fullgraph=True)(x)
    finally:
        reset()
    assert [failure.status for failure in checker.tally.failures] == (
        [] if right else [Status.FAIL_ACCURACY]
    )
    assert list(checker.tally.judged) == [0]
    if given != "negative, real":
        assert right, "Inductor computes this view as eager does"


@pytest.mark.parametrize("given", INPUTS)
def test_a_model_given_a_view_is_judged_as_its_compiled_code_computes(given: str) -> None:
    x = INPUTS[given]()
    right = _compiled_right(x)
    try:
        outcome = check_model(affine, [x])
    finally:
        reset()
    assert outcome.status is (Status.PASS if right else Status.FAIL_ACCURACY), outcome.message
