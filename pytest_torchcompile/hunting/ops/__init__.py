"""The op catalogue a program's steps are drawn from, one module per family. Each op reads the
drawn value ``a`` and adds one step to the program, or returns False where it does not apply to
``a`` (the step is then a unary op, which applies to any tensor)."""

from __future__ import annotations

from collections.abc import Callable

from pytest_torchcompile.hunting.builder import Builder, Value
from pytest_torchcompile.hunting.ops.elementwise import (
    binary,
    cast,
    dtype_view,
    unary,
    where,
    with_scalar,
)
from pytest_torchcompile.hunting.ops.indexing import indexing
from pytest_torchcompile.hunting.ops.movement import rearrange, view
from pytest_torchcompile.hunting.ops.reductions import matmul, order, reduction, scan
from pytest_torchcompile.hunting.ops.windows import window
from pytest_torchcompile.hunting.ops.writes import in_place

_Op = Callable[[Builder, Value], bool]

OPS: tuple[_Op, ...] = (
    unary,
    binary,
    with_scalar,
    reduction,
    view,
    cast,
    where,
    scan,
    indexing,
    in_place,
    matmul,
    dtype_view,
    rearrange,
    window,
    order,
)
"""In the order hypothesis shrinks towards: the first, unary ops."""

__all__ = ["OPS", "unary"]
