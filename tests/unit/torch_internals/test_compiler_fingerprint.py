"""The compiler fingerprint counts code, not the state compiler functions keep at run time."""

from __future__ import annotations

import contextlib
from collections.abc import Callable

import pytest
import torch

from pytest_torchcompile.torch_internals import fingerprint


def memoized(compute: Callable[[], str]) -> Callable[[], str]:
    """A memoizing wrapper as torch 2.14 writes one (``prefetchable_cache``): its result in a
    closure variable it rebinds."""
    result: str | None = None

    def wrapper() -> str:
        nonlocal result
        if result is None:
            result = compute()
        return result

    return wrapper


def one() -> str:
    return "one"


def two() -> str:
    return "two"


def test_a_memoized_result_is_not_code() -> None:
    wrapper = memoized(one)
    before = fingerprint._code_identity(wrapper)
    wrapper()
    assert fingerprint._code_identity(wrapper) == before


def test_the_function_a_wrapper_holds_is_code() -> None:
    assert fingerprint._code_identity(memoized(one)) != fingerprint._code_identity(memoized(two))


def test_computing_torchs_compiler_key_leaves_the_fingerprint_alone() -> None:
    # On torch 2.14 triton_key is a prefetchable_cache wrapper (emptied here, so that the key is
    # computed between the two fingerprints) that keeps the key, a string, in its closure; on 2.13
    # it is a plain function.
    import torch._inductor.codecache as codecache

    if not hasattr(codecache, "triton_key"):
        pytest.skip(f"torch {torch.__version__} has no codecache.triton_key")
    clear = getattr(codecache.triton_key, "clear", None)
    if torch.__version__ >= "2.14":
        assert clear is not None, "2.14's triton_key is a prefetchable_cache"
    if clear is not None:
        clear()
    before = fingerprint.compiler_fingerprint(["torch._inductor.codecache"])[
        "torch._inductor.codecache"
    ]
    with contextlib.suppress(ImportError):  # no Triton installed: nothing is computed
        codecache.triton_key()
    assert fingerprint.compiler_fingerprint()["torch._inductor.codecache"] == before
