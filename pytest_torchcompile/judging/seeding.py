"""The generators around a judge's runs: a graph that draws random numbers runs its eager, fp64
and compiled runs from one seed, and the generators are left as they were.

Embedded in every full repro file with ``judge.py``: torch and the standard library only.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import torch

from pytest_torchcompile.torch_internals.random_ops import draws_random_numbers


def draws_random(gm: Any) -> bool:
    """Whether a graph draws random numbers (dropout, ``torch.rand``...)."""
    graph = getattr(gm, "graph", None)
    return graph is not None and any(
        node.op == "call_function" and draws_random_numbers(node.target, node.args, node.kwargs)
        for node in graph.nodes
    )


@contextlib.contextmanager
def seeded_alike(gm: Any) -> Iterator[None]:
    """For a graph that draws random numbers, run the block from one seed, leaving the generators
    as they were: its eager, fp64 and compiled runs (compiled with Inductor's fallback_random,
    which draws from eager's generator) then draw alike."""
    if not draws_random(gm):
        yield
        return
    with generators_kept():
        torch.manual_seed(0)
        yield


def rng_devices() -> list[int]:
    """The CUDA devices whose generators exist yet."""
    return list(range(torch.cuda.device_count())) if torch.cuda.is_initialized() else []


def rng_states() -> list[torch.Tensor]:
    """The states of torch's default generators: the CPU's, then each CUDA device's."""
    return [torch.random.get_rng_state()] + [
        torch.cuda.get_rng_state(index) for index in rng_devices()
    ]


def set_rng_states(states: list[torch.Tensor]) -> None:
    torch.random.set_rng_state(states[0])
    for index, state in zip(rng_devices(), states[1:], strict=False):
        # A device-side error (an assert in a compiled kernel) leaves the device unusable to this
        # process: its generator cannot be set, and nothing can draw from it any more.
        with contextlib.suppress(RuntimeError):
            torch.cuda.set_rng_state(state, index)


@contextlib.contextmanager
def generators_kept() -> Iterator[None]:
    """torch.random.fork_rng that survives a device lost inside the block, whose failure must
    surface as the block's own error, not as one from restoring a generator."""
    states = rng_states()
    try:
        yield
    finally:
        set_rng_states(states)
