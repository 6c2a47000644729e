"""One CPU budget for a whole run: the processes that compile at once share this machine's CPUs.

Under ``pytest -n N`` every worker compiles, and each would otherwise take the whole machine:
OpenMP threads for eager and generated CPU code, as many Inductor compile workers as there are
cores, and the same again for the children it starts (the judging child of the minifier, a
fresh minifying process). N workers would then run N times the machine's CPUs, and a check
under ``-n 4`` would take longer than four checks one after the other.

So each xdist worker gets its share, ``CPUs // N`` (the CPUs this process may run on, from
``os.sched_getaffinity``): ``torch.set_num_threads``, Inductor's ``compile_threads`` (read when
its compile pool starts, so set before the first compile), and ``OMP_NUM_THREADS`` /
``TORCHINDUCTOR_COMPILE_THREADS`` for the children it starts. In the minify phase the processes
still minifying share the CPUs again. A single process keeps torch's defaults.

``--compile-accuracy-threads N`` (ini ``compile_accuracy_threads``, env ``PYTEST_TORCHCOMPILE_THREADS``) gives every
process N threads instead; ``0`` leaves torch's defaults everywhere.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator

import pytest

from pytest_torchcompile.common import options, roles

LIMITED_KEY = pytest.StashKey[int]()
"""The threads :func:`configure` gave this process, when it limited them."""
CHILD_ENV = ("OMP_NUM_THREADS", "TORCHINDUCTOR_COMPILE_THREADS")
"""What a child process reads its thread counts from when it starts."""


def cpus() -> int:
    """The CPUs this process may run on."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def override(config: pytest.Config) -> int | None:
    """The user's threads per process: ``--compile-accuracy-threads`` (or its ini key), else
    ``PYTEST_TORCHCOMPILE_THREADS``; None when neither is given."""
    threads: int | None = options.option_value(config, options.option("compile-accuracy-threads"))
    return threads


def share(processes: int, given: int | None = None) -> int | None:
    """Threads for each of ``processes`` processes compiling at once; None: torch's defaults (one
    process, or an override of 0)."""
    if given is not None:
        return given or None
    if processes <= 1:
        return None
    return max(1, cpus() // processes)


def configure(config: pytest.Config, limit: Callable[[int], None]) -> int | None:
    """Give this process its share of the run's CPUs (from ``pytest_configure``, before any
    compile) through ``limit``, which gives a process that many threads; returns the threads
    given, None when torch's defaults stay."""
    threads = share(roles.worker_count(config), override(config))
    if threads is not None:
        limit(threads)
        config.stash[LIMITED_KEY] = threads
    return threads


def for_minifying(config: pytest.Config, at_once: int) -> int | None:
    """Threads for each child of the ``at_once`` processes minifying together; a process that
    minifies alone gets the whole machine back."""
    given = override(config)
    threads = share(at_once, given)
    if threads is None and given is None and LIMITED_KEY in config.stash:
        return cpus()
    return threads


@contextlib.contextmanager
def children_limited(threads: int | None) -> Iterator[None]:
    """Children started in the block get at most ``threads`` threads each (None: as before)."""
    saved = {name: os.environ.get(name) for name in CHILD_ENV}
    if threads is not None:
        os.environ.update({name: str(threads) for name in CHILD_ENV})
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
