"""A model compiled through AOT autograd with Inductor's decompositions and partitioner, its
graphs run by eager kernels (``aot_eager_decomp_partition``), in its own precision or in fp64."""

from __future__ import annotations

import contextlib
import functools
import importlib
from collections.abc import Callable
from types import TracebackType
from typing import Any

import torch
from torch.utils._python_dispatch import _disable_current_modes

from pytest_torchcompile.torch_internals.compiling import first_missing_attribute
from pytest_torchcompile.torch_internals.fp64 import float64_everywhere

_BACKEND = ("torch._dynamo.backends.debugging", "aot_eager_decomp_partition_with_mode")
"""torch's ``aot_eager_decomp_partition`` whose graphs run inside a mode: the same
decompositions (``select_decomp_table``) and partitioner (``min_cut_rematerialization_partition``
for Inductor), one backend for both precisions."""


def decomposed_missing() -> str | None:
    """The internal the decomposed evaluation needs and this torch lacks, or None."""
    return first_missing_attribute([_BACKEND])


class _Widening:
    """``float64_everywhere`` as a mode the backend enters around each graph call (forward and
    backward), as often as it is called."""

    def __init__(self) -> None:
        self._stack: list[contextlib.ExitStack] = []

    def __enter__(self) -> None:
        stack = contextlib.ExitStack()
        stack.enter_context(float64_everywhere())
        self._stack.append(stack)

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self._stack.pop().close()


def decomposed(
    fn: Callable[..., Any], dynamic: bool | None, fp64: bool = False
) -> Callable[..., Any]:
    """``fn`` compiled so that its graphs are Inductor's decomposed graphs run by eager kernels.
    With ``fp64`` they run in fp64 even where they name a dtype (as the fp64 reference runs):
    give it a model and inputs widened to fp64, and call it inside ``float64_everywhere`` so
    that what runs outside its graphs (a loss's ``.float()``, a graph break) is widened too;
    the call leaves that mode for Dynamo, which compiles nothing under a dispatch mode, and its
    graphs enter it again. Graph breaks run eagerly between graphs."""
    # Dynamo's backends load when a compile needs them, as a test's own compile loads them.
    backend = getattr(importlib.import_module(_BACKEND[0]), _BACKEND[1])
    mode = _Widening() if fp64 else contextlib.nullcontext()
    compiled = torch.compile(fn, backend=functools.partial(backend, mode=mode), dynamic=dynamic)
    if not fp64:
        return compiled

    def outside_modes(*args: Any, **kwargs: Any) -> Any:
        with _disable_current_modes():
            return compiled(*args, **kwargs)

    return outside_modes
