"""A program under construction: the values its steps made so far (eager tensors, so each step
is drawn among the ops valid for them), its lines of source, and the small draws that the ops of
``ops/`` share (an operand, a dim, a scalar, index literals)."""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from hypothesis import strategies as st

from pytest_torchcompile.hunting.program import namespace


@dataclass
class Value:
    """A value of the program: an input or a step's result, as eager computed it."""

    name: str
    tensor: torch.Tensor
    writable: bool
    """May be written in place: no expanded (self-overlapping) memory under it."""
    differentiable: bool


@dataclass
class Builder:
    """The program drawn so far. Each op adds one :meth:`step`."""

    draw: st.DrawFn
    training: bool
    values: list[Value] = field(default_factory=list)
    lines: list[str] = field(default_factory=list)
    read: set[str] = field(default_factory=set)
    counter: itertools.count[int] = field(default_factory=itertools.count)

    def step(
        self,
        expression: str,
        operands: Sequence[Value],
        writable: bool = True,
        differentiable: bool = True,
    ) -> None:
        env = {**namespace(), **{value.name: value.tensor for value in self.values}}
        tensor = eval(expression, env)
        name = f"v{next(self.counter)}"
        self.lines.append(f"    {name} = {expression}")
        self.read.update(value.name for value in operands)
        grad = (
            differentiable
            and tensor.is_floating_point()
            and any(v.differentiable for v in operands)
        )
        self.values.append(Value(name, tensor, writable, grad))

    def view_step(self, expression: str, a: Value) -> None:
        """A step that views ``a``: writable where ``a`` is."""
        self.step(expression, [a], writable=a.writable)

    def pick(self, candidates: Sequence[Value]) -> Value:
        # The latest value first: shrinking keeps a chain of steps rather than the inputs alone.
        return self.draw(st.sampled_from(list(reversed(candidates))))

    def takes(self, form: str) -> bool:
        """Whether the program may take the op: autograd has no derivative of ``//``."""
        return not self.training or "//" not in form

    def dim(self, tensor: torch.Tensor) -> int:
        return self.draw(st.integers(0, tensor.dim() - 1))

    def scalar(self, tensor: torch.Tensor) -> str:
        """A literal of ``tensor``'s kind: no negative one for uint8."""
        if tensor.dtype == torch.bool:
            return repr(self.draw(st.booleans()))
        if tensor.dtype == torch.uint8:
            return str(self.draw(st.integers(0, 3)))
        return repr(
            self.draw(
                st.sampled_from([2, -1, 0.5, 3, -2.5]) if is_float(tensor) else st.integers(-3, 3)
            )
        )

    def index_tensor(self, shape: Sequence[int], bound: int) -> str:
        """A literal index tensor of ``shape``, its values below ``bound``."""
        count = math.prod(shape)
        values = self.draw(st.lists(st.integers(0, bound - 1), min_size=count, max_size=count))
        return f"torch.tensor({nested(values, shape)!r})"

    def distinct_indices(self, bound: int) -> list[int]:
        return self.draw(
            st.lists(st.integers(0, bound - 1), min_size=1, max_size=bound, unique=True)
        )


def is_float(tensor: torch.Tensor) -> bool:
    return tensor.is_floating_point()


def is_int(tensor: torch.Tensor) -> bool:
    return not tensor.is_floating_point() and tensor.dtype != torch.bool


def broadcasts(shape: Sequence[int], into: Sequence[int]) -> bool:
    """``shape`` broadcasts to exactly ``into``."""
    if len(shape) > len(into):
        return False
    return all(
        side in (1, target) for side, target in zip(reversed(shape), reversed(into), strict=False)
    )


def compatible(a: Sequence[int], b: Sequence[int]) -> bool:
    """``a`` and ``b`` broadcast together."""
    return all(x == y or 1 in (x, y) for x, y in zip(reversed(a), reversed(b), strict=False))


def literal(values: Sequence[Any]) -> str:
    return "[" + ", ".join(repr(value) for value in values) + "]"


def nested(values: list[Any], shape: Sequence[int]) -> Any:
    """``values`` as nested lists of ``shape``."""
    if not shape:
        return values[0]
    size = math.prod(shape[1:])
    return [nested(values[i * size : (i + 1) * size], shape[1:]) for i in range(shape[0])]
