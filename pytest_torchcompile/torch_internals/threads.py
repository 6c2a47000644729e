"""The CPU threads of this process's code and Inductor's compile workers."""

from __future__ import annotations

import os
import sys
import threading

import torch
import torch.fx

from pytest_torchcompile.common.budget import CHILD_ENV
from pytest_torchcompile.torch_internals.compiling import first_missing_attribute


def limit_this_process(threads: int) -> None:
    """At most ``threads`` threads for this process's eager and compiled CPU code, its Inductor
    compile workers, and the children it starts from now on."""
    torch.set_num_threads(threads)
    # Read by the children it starts, and by this process's Inductor config if it is imported later.
    os.environ.update({name: str(threads) for name in CHILD_ENV})
    set_compile_threads(threads)


def set_compile_threads(threads: int) -> None:
    """How many compile workers Inductor's pool gets (read when the pool starts, at the first
    compile that needs it), where Inductor's config is imported already. It is not imported for
    this (that imports Dynamo): imported later, it reads ``TORCHINDUCTOR_COMPILE_THREADS``."""
    inductor_config_module = sys.modules.get("torch._inductor.config")
    if inductor_config_module is not None:
        inductor_config_module.compile_threads = threads  # type: ignore[attr-defined]


def compile_workers() -> set[int]:
    """The threads of Inductor's compile worker pool (where a compile's C++ builds run), by
    ident; none before the pool starts, or where this torch keeps no such pool
    (:func:`compile_workers_missing`). The pool is never started for the answer."""
    async_compile = sys.modules.get("torch._inductor.async_compile")
    pool = getattr(getattr(async_compile, "AsyncCompile", None), "pool", None)
    cache_info = getattr(pool, "cache_info", None)
    if pool is None or cache_info is None or not cache_info().currsize:
        return set()
    threads: set[threading.Thread] = getattr(pool(), "_threads", set())
    return {thread.ident for thread in list(threads) if thread.ident is not None}


def compile_workers_missing() -> str | None:
    """What :func:`compile_workers` reads that this torch lacks; None where it has it."""
    return first_missing_attribute(
        [("torch._inductor.async_compile", "AsyncCompile")],
        lambda value: hasattr(getattr(value, "pool", None), "cache_info"),
    )
