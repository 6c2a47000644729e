"""A drawn program: its source, the expressions of its inputs and the keywords a check of it
needs; how it runs (its function, fresh inputs) and how it reads as a standalone script. Also the
fill of a larger input (:func:`filled`) and the values inputs are drawn within."""

from __future__ import annotations

import linecache
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

ALL_DTYPES: tuple[torch.dtype, ...] = (
    torch.float32,
    torch.int64,
    torch.bool,
    torch.float16,
    torch.bfloat16,
    torch.int32,
    torch.int8,
    torch.uint8,
    torch.int16,
    torch.float64,
)
"""Simplest first: shrinking settles on the first dtype that still fails."""

FLOAT_BOUND = 4.0
"""Floating inputs hold values in ``[-FLOAT_BOUND, FLOAT_BOUND]``."""
INT_BOUND = 8
"""Integer inputs hold values in ``[-INT_BOUND, INT_BOUND]`` (``[0, INT_BOUND]`` unsigned)."""


def special_values(dtype: torch.dtype) -> tuple[float, ...]:
    """The float values at the edges of IEEE arithmetic that an input may hold: NaN, both
    infinities, a negative zero and a subnormal of ``dtype``."""
    return (math.nan, math.inf, -math.inf, -0.0, torch.finfo(dtype).tiny / 8)


def filled(
    shape: Sequence[int], dtype: torch.dtype, seed: int, specials: bool = False
) -> torch.Tensor:
    """A tensor of ``shape`` and ``dtype`` with values from ``seed``: floats in ``[-4, 4]``,
    integers in ``[-8, 8]`` (``[0, 8]`` unsigned), bools half true. With ``specials``, about one
    float in eight is one of :func:`special_values` instead."""
    generator = torch.Generator().manual_seed(seed)
    if dtype == torch.bool:
        return torch.rand(tuple(shape), generator=generator) < 0.5
    if dtype.is_floating_point:
        values = torch.rand(tuple(shape), generator=generator, dtype=torch.float64)
        values = values * 2 * FLOAT_BOUND - FLOAT_BOUND
        if specials:
            edges = torch.tensor(special_values(dtype), dtype=torch.float64)
            which = torch.randint(0, 8 * len(edges), tuple(shape), generator=generator)
            values = torch.where(which < len(edges), edges[which.clamp(max=len(edges) - 1)], values)
        return values.to(dtype)
    low = 0 if dtype == torch.uint8 else -INT_BOUND
    return torch.randint(low, INT_BOUND + 1, tuple(shape), generator=generator).to(dtype)


def namespace() -> dict[str, Any]:
    """The names a program's source and its inputs' expressions use, in a namespace of their
    own (running one writes into it)."""
    return {"torch": torch, "math": math, "inf": math.inf, "nan": math.nan, "filled": filled}


def evaluated(expression: str) -> torch.Tensor:
    """The tensor an input's expression builds."""
    tensor: torch.Tensor = eval(expression, namespace())
    return tensor


@dataclass(frozen=True)
class Program:
    """A drawn program: its source (``def program(x0, ...)``), the expression of each input,
    and the keywords a check of it needs (``backward``, ``dynamic``)."""

    source: str
    input_sources: tuple[str, ...]
    options: dict[str, Any] = field(default_factory=dict)

    @property
    def ops(self) -> int:
        """The steps of the program."""
        return sum(1 for line in self.source.splitlines() if line.startswith("    v"))

    def make_inputs(self) -> tuple[torch.Tensor, ...]:
        """Fresh input tensors (the program may write into them)."""
        return tuple(evaluated(source) for source in self.input_sources)

    @property
    def fn(self) -> Callable[..., Any]:
        """The program as a function, compiled from its source (shown in tracebacks)."""
        filename = f"<program {abs(hash(self.source)):x}>"
        linecache.cache[filename] = (len(self.source), None, self.source.splitlines(True), filename)
        names = namespace()
        exec(compile(self.source, filename, "exec"), names)
        function: Callable[..., Any] = names["program"]
        return function

    def script(self) -> str:
        """A standalone script: the program, its inputs and the call."""
        names = ", ".join(f"x{index}" for index in range(len(self.input_sources)))
        inputs = "\n".join(
            f"x{index} = {source}" for index, source in enumerate(self.input_sources)
        )
        options = f"  # check with {self.options}" if self.options else ""
        # Only where an input is built by it: a script of small inputs needs only torch.
        filling = (
            "from pytest_torchcompile.strategies import filled\n" if "filled(" in inputs else ""
        )
        return (
            f"from math import inf, nan\n\nimport torch\n{filling}\n{self.source}\n"
            f"{inputs}\nprogram({names}){options}\n"
        )

    def __repr__(self) -> str:
        return f"Program(\n{self.script()})"
