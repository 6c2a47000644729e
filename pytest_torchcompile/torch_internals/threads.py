"""The CPU threads of this process's code and Inductor's compile workers."""

from __future__ import annotations

import os
import sys

import torch
import torch.fx

from pytest_torchcompile.common.budget import CHILD_ENV


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
