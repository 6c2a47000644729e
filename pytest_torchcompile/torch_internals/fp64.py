"""Running code in fp64 even where it names a dtype. Embedded in repro files: only torch."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import torch
import torch.fx
from torch._ops import HigherOrderOperator
from torch.utils._python_dispatch import TorchDispatchMode


@contextlib.contextmanager
def float64_everywhere() -> Iterator[None]:
    """Run code in fp64 even where it names a dtype: ``x.float()``, ``torch.zeros(..., dtype=
    torch.float32)`` and ``prims.convert_element_type(x, torch.float16)`` all produce float64.

    Works at the aten level (a dispatch mode), so it covers eager models and post-AOT graphs alike.
    A higher-order op (``torch.cond``, ...) runs on its widened inputs with the mode off inside it:
    a dtype its body names is kept.
    """
    low_precision = (torch.float16, torch.bfloat16, torch.float32)

    def widen(value: Any) -> Any:
        return torch.float64 if isinstance(value, torch.dtype) and value in low_precision else value

    reinterpreting = {torch.ops.aten.view.dtype}

    class Float64Mode(TorchDispatchMode):
        supports_higher_order_operators = True

        def __torch_dispatch__(
            self, func: Any, types: Any, args: Any = (), kwargs: Any = None
        ) -> Any:
            kwargs = kwargs or {}
            if func not in reinterpreting and not isinstance(func, HigherOrderOperator):
                args = tuple(widen(a) for a in args)
                kwargs = {k: widen(v) for k, v in kwargs.items()}
            return func(*args, **kwargs)

    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        with Float64Mode(), torch.autocast("cpu", enabled=False):
            if torch.cuda.is_available():
                with torch.autocast("cuda", enabled=False):
                    yield
            else:
                yield
    finally:
        torch.set_default_dtype(previous)
