"""torch 2.9 to 2.11 warn from the legacy TF32 getters and setters that turning TF32 off for a
check calls; under ``-W error`` that warning must not fail the user's test, nor be hidden from
the user's own legacy calls."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import pytest
import torch

from pytest_torchcompile.judging.precision import LEGACY_TF32_WARNING, full_fp32_precision

LEGACY_CALLS = (
    "_get_cudnn_allow_tf32",
    "_set_cudnn_allow_tf32",
    "_get_cublas_allow_tf32",
    "_set_cublas_allow_tf32",
    "_set_float32_matmul_precision",
)


def warning_first(call: Callable[..., Any]) -> Callable[..., Any]:
    def warned(*args: Any) -> Any:
        warnings.warn(
            f"{LEGACY_TF32_WARNING}, such as torch.backends.cudnn.conv.fp32_precision",
            UserWarning,
            stacklevel=2,
        )
        return call(*args)

    return warned


@pytest.fixture
def warning_legacy_api(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in LEGACY_CALLS:
        monkeypatch.setattr(torch._C, name, warning_first(getattr(torch._C, name)))


@pytest.mark.usefixtures("warning_legacy_api")
def test_turning_tf32_off_is_silent_under_w_error_where_the_legacy_api_warns() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with full_fp32_precision():
            assert torch.backends.cudnn.allow_tf32 is False
        with pytest.raises(UserWarning, match=LEGACY_TF32_WARNING):
            torch._C._get_cudnn_allow_tf32()


def test_the_warning_is_still_heard_where_it_comes_from_the_users_own_code() -> None:
    with warnings.catch_warnings(record=True) as heard:
        warnings.simplefilter("always")
        with full_fp32_precision():
            warnings.warn("the user's own warning", UserWarning, stacklevel=1)
    assert [str(warning.message) for warning in heard] == ["the user's own warning"]
