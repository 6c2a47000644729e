"""Random draws: compiled code drawing eager's numbers, and an fp64 run replaying eager's draws."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import Any

import torch
import torch.fx
from torch.utils._python_dispatch import TorchDispatchMode

from pytest_torchcompile.torch_internals.random_ops import draws_random_numbers

EAGER_RNG_CONFIG: dict[str, Any] = {"fallback_random": True, "layout_optimization": False}
"""Inductor config under which compiled random ops call eager's kernels on eager's generator
(``fallback_random``) with their inputs laid out as eager lays them out, so that compiled and
eager code seeded alike draw the same numbers (as PyTorch's accuracy runs do). The layout matters:
a kernel fills its draws in memory order, and with layout optimization Inductor can hand a dropout
a convolution's output laid out channels-last, whose elements then get other draws than eager's
(torch 2.11 does so on a CPU)."""


class RandomDrawMismatch(Exception):
    """A replayed run asked for other random draws than the recorded run made."""


@contextlib.contextmanager
def recording_random_draws(draws: list[tuple[Any, Any]]) -> Iterator[None]:
    """Append to ``draws`` what each random op of the block produced."""

    class Record(TorchDispatchMode):
        def __torch_dispatch__(
            self, func: Any, types: Any, args: Any = (), kwargs: Any = None
        ) -> Any:
            out = func(*args, **(kwargs or {}))
            if draws_random_numbers(func, args, kwargs):
                values = out if isinstance(out, (tuple, list)) else (out,)
                draws.append(
                    (
                        func,
                        [v.detach().clone() if isinstance(v, torch.Tensor) else v for v in values],
                    )
                )
            return out

    with Record():
        yield


@contextlib.contextmanager
def replaying_random_draws(draws: Sequence[tuple[Any, Any]]) -> Iterator[None]:
    """Make the block's random ops return what they drew in a recorded run, in the block's own
    dtype: an fp64 run draws other numbers than an fp32 one for some ops (``torch.rand``, CUDA's
    generators). Dropout's output is recomputed from the recorded mask at the block's precision.
    Raises :class:`RandomDrawMismatch` when the block draws differently from the recording."""
    pending = list(draws)

    class Replay(TorchDispatchMode):
        def __torch_dispatch__(
            self, func: Any, types: Any, args: Any = (), kwargs: Any = None
        ) -> Any:
            out = func(*args, **(kwargs or {}))
            if not draws_random_numbers(func, args, kwargs):
                return out
            if not pending or pending[0][0] is not func:
                raise RandomDrawMismatch(f"{func} is not the random op the recorded run drew next")
            _, recorded = pending.pop(0)
            return _replayed(func, args, out, recorded)

    with Replay():
        yield
    if pending:
        raise RandomDrawMismatch(f"{len(pending)} recorded random draw(s) were not made again")


def _replayed(func: Any, args: Any, out: Any, recorded: Any) -> Any:
    """A random op's results ``out`` made what the recorded run drew (``recorded``), in their
    own dtype; a dropout's output recomputed from the recorded mask."""
    values = list(out) if isinstance(out, (tuple, list)) else [out]
    if func is torch.ops.aten.native_dropout.default and args[2]:
        mask = recorded[1]
        values = [args[0] * mask * (1.0 / (1.0 - args[1])), mask.clone()]
    else:
        for value, drawn in zip(values, recorded, strict=True):
            if isinstance(value, torch.Tensor):
                _copy_drawn(func, value, drawn)
    return tuple(values) if isinstance(out, (tuple, list)) else values[0]


def _copy_drawn(func: Any, value: torch.Tensor, drawn: torch.Tensor) -> None:
    if value.shape != drawn.shape:
        raise RandomDrawMismatch(
            f"{func} drew shape {tuple(value.shape)}, recorded {tuple(drawn.shape)}"
        )
    with torch.no_grad():
        value.copy_(drawn)
