"""Inductor's compile workers, told by thread: the plugin's compiles build their C++ there, and
what those builds log is the plugin's (``checking/aside.unlogged``)."""

from __future__ import annotations

import concurrent.futures
import functools
from collections.abc import Iterator

import pytest
import torch._inductor.async_compile as async_compile

from pytest_torchcompile.torch_internals.availability import features_off
from pytest_torchcompile.torch_internals.threads import compile_workers


@pytest.fixture
def pool(monkeypatch: pytest.MonkeyPatch) -> Iterator[concurrent.futures.ThreadPoolExecutor]:
    """Inductor's pool, as it keeps it (started at its first use), of two threads."""
    executor = concurrent.futures.ThreadPoolExecutor(2)
    started = functools.lru_cache(1)(lambda: executor)
    monkeypatch.setattr(async_compile.AsyncCompile, "pool", staticmethod(started))
    try:
        yield executor
    finally:
        executor.shutdown()


def test_the_pools_threads_are_its_workers_once_it_started(
    pool: concurrent.futures.ThreadPoolExecutor,
) -> None:
    assert compile_workers() == set()
    list(async_compile.AsyncCompile.pool().map(bool, range(8)))
    workers = compile_workers()
    assert workers and workers == {thread.ident for thread in pool._threads}


def test_a_torch_whose_pool_is_kept_otherwise_has_no_workers_and_says_so(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(
        async_compile.AsyncCompile,
        "pool",
        staticmethod(lambda: concurrent.futures.ThreadPoolExecutor(1)),
    )
    assert compile_workers() == set()
    [off] = [feature for feature in features_off() if "compile workers" in feature.feature]
    assert off.internal == "torch._inductor.async_compile.AsyncCompile"
