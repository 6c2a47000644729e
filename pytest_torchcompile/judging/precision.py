"""Full fp32 precision for a judge's runs: TF32 off in matmuls and convolutions, through the
API the installed torch reads (the legacy flags or the per-backend precision), so that eager,
fp64 and compiled runs differ by the compiler alone.

Embedded in every full repro file with ``judge.py``: torch and the standard library only.
"""

from __future__ import annotations

import contextlib
import inspect
import warnings
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import torch

LEGACY_TF32_WARNING = "Please use the new API settings to control TF32 behavior"
"""What torch warns, once per process, when the TF32 flags are read or set through the legacy API."""


@contextlib.contextmanager
def full_fp32_precision() -> Iterator[None]:
    """Turn TF32 off while checking, as PyTorch's own accuracy runs do: cuDNN uses it by default,
    so eager and compiled code can take different precision paths for one op (a depthwise
    convolution eagerly exact, compiled through cuDNN in TF32) and differ by far more than
    either's rounding. Matmuls run in full fp32 too (``set_float32_matmul_precision("medium")``
    makes CPU matmuls bf16).

    Works where global flags are frozen (``torch.backends.disable_global_flags()``, which
    ``torch.testing._internal.common_utils`` calls on import) and with either TF32 API, and
    restores every flag as it was. The legacy API's deprecation warning (torch 2.9 to 2.11 give
    it from the getters and setters this calls) is the plugin's to hear, not the user's: under
    ``-W error`` it would fail the user's test."""
    with _legacy_tf32_api_quiet(), _matmul_in_fp32(), _cudnn_without_tf32():
        yield


def at_full_fp32(cuda: bool) -> bool:
    """Whether code runs now at the precision :func:`full_fp32_precision` sets: the flags it sets
    read alike (cuDNN's and CUDA matmuls' only for ``cuda``). A test's compiled call made
    otherwise is run again under it to be judged: its references are taken there."""
    outside = _precision_flags(cuda)
    with full_fp32_precision():
        inside = _precision_flags(cuda)
    # A per-operation precision of "none" follows the global one, which is read beside it.
    return all(
        flag == full or "none" in (flag, full) for flag, full in zip(outside, inside, strict=True)
    )


def _precision_flags(cuda: bool) -> list[Any]:
    """The flags that decide the precision of fp32 matmuls (and, for ``cuda``, convolutions);
    None for one this torch lacks or refuses to read (set both ways, in disagreement)."""
    reads: list[Callable[[], Any]] = [
        torch.get_float32_matmul_precision,
        lambda: torch.backends.mkldnn.matmul.fp32_precision,  # type: ignore[attr-defined]
    ]
    if cuda:
        reads += [
            lambda: torch.backends.cudnn.allow_tf32,
            lambda: torch.backends.cuda.matmul.allow_tf32,
            lambda: torch.backends.cudnn.conv.fp32_precision,  # type: ignore[attr-defined]
            lambda: torch.backends.cuda.matmul.fp32_precision,
        ]
    flags = []
    with _legacy_tf32_api_quiet():
        for read in reads:
            try:
                flags.append(read())
            except (AttributeError, RuntimeError):
                flags.append(None)
    return flags


@contextlib.contextmanager
def _legacy_tf32_api_quiet() -> Iterator[None]:
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=LEGACY_TF32_WARNING, category=UserWarning)
        yield


@contextlib.contextmanager
def _fp32_precision(owners: Sequence[Any], precision: str | None) -> Iterator[None]:
    """Set the per-operation ``fp32_precision`` (TF32 API of torch >= 2.9) of ``owners`` for the
    block (None: leave it), and put back what each had on exit."""
    owners = [owner for owner in owners if hasattr(owner, "fp32_precision")]
    saved = [owner.fp32_precision for owner in owners]
    try:
        if precision is not None:
            for owner in owners:
                owner.fp32_precision = precision
        yield
    finally:
        for owner, previous in zip(owners, saved, strict=True):
            owner.fp32_precision = previous


def _legacy_tf32_flags_readable(read: Callable[[], Any]) -> bool:
    """False where a program set TF32 through the legacy and the per-operation API so that they
    disagree: torch then refuses to read the legacy flag, and only the per-operation one counts."""
    try:
        read()
    except RuntimeError:
        return False
    return True


def _cudnn_without_tf32() -> contextlib.AbstractContextManager[None]:
    cudnn = torch.backends.cudnn
    if not _legacy_tf32_flags_readable(lambda: cudnn.allow_tf32):
        return _fp32_precision([getattr(cudnn, "conv", None)], "ieee")
    # The flags context manager works while flags are frozen; None leaves a flag as it is. The
    # per-operation precision goes to "ieee" too: left unset, it inherits a "tf32" set for all.
    flags = dict.fromkeys(inspect.signature(cudnn.flags).parameters)
    flags["allow_tf32"] = False
    if "fp32_precision" in flags:
        flags["fp32_precision"] = "ieee"
    return cudnn.flags(**flags)


@contextlib.contextmanager
def _matmul_in_fp32() -> Iterator[None]:
    owners = [torch.backends.cuda.matmul, getattr(torch.backends.mkldnn, "matmul", None)]
    if not _legacy_tf32_flags_readable(torch.get_float32_matmul_precision):
        with _fp32_precision(owners, "ieee"):
            yield
        return
    saved = torch.get_float32_matmul_precision()
    # set_float32_matmul_precision overwrites the per-operation settings: they are put back after.
    with _fp32_precision(owners, None):
        torch.set_float32_matmul_precision("highest")
        try:
            yield
        finally:
            torch.set_float32_matmul_precision(saved)
