"""In-place writes into inputs and intermediates: arithmetic and copies from a partner, clamps,
negation, masked fills, index_add_ and slice assignment. Training programs write nothing in
place, and nothing writes into memory that overlaps itself."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

import torch
from hypothesis import strategies as st

from pytest_torchcompile.hunting.builder import Builder, Value, broadcasts, is_float, literal


def _writes_into(kind: str, source: torch.Tensor, target: torch.Tensor) -> bool:
    """Whether ``target.<kind>(source)`` is valid and well defined: ``source`` broadcasts to
    ``target``'s shape; ``copy_`` takes no float into an integer (out of range, anything); the
    arithmetic's result casts to ``target``'s dtype."""
    if not broadcasts(source.shape, target.shape):
        return False
    if kind == "copy_":
        return not (is_float(source) and not is_float(target))
    if kind == "mul_" and target.dtype == torch.bool:
        return False
    return torch.can_cast(torch.result_type(target, source), target.dtype)


def _from_partner(kind: str, builder: Builder, a: Value) -> bool:
    """``a.add_(b)``, ``a.mul_(b)`` or ``a.copy_(b)`` of another value ``b``."""
    partners = [
        v for v in builder.values if v.name != a.name and _writes_into(kind, v.tensor, a.tensor)
    ]
    if not partners:
        return False
    b = builder.pick(partners)
    # Eager refuses a source that overlaps the tensor written.
    shared = b.tensor.untyped_storage().data_ptr() == a.tensor.untyped_storage().data_ptr()
    builder.step(
        f"{a.name}.{kind}({b.name}{'.clone()' if shared else ''})", [a, b], writable=a.writable
    )
    return True


def _clamp(builder: Builder, a: Value) -> bool:
    if a.tensor.dtype in (torch.bool, torch.uint8):
        return False
    builder.view_step(f"{a.name}.clamp_(-2, 2)", a)
    return True


def _neg(builder: Builder, a: Value) -> bool:
    if a.tensor.dtype == torch.bool:
        return False
    builder.view_step(f"{a.name}.neg_()", a)
    return True


def _masked_fill(builder: Builder, a: Value) -> bool:
    masks = [
        v
        for v in builder.values
        if v.tensor.dtype == torch.bool and broadcasts(v.tensor.shape, a.tensor.shape)
    ]
    if not masks:
        return False
    mask = builder.pick(masks)
    builder.step(
        f"{a.name}.masked_fill_({mask.name}, {builder.scalar(a.tensor)})",
        [a, mask],
        writable=a.writable,
    )
    return True


def _index_add(builder: Builder, a: Value) -> bool:
    t = a.tensor
    if t.dim() == 0 or t.dtype == torch.bool:
        return False
    d = builder.dim(t)
    indices = builder.distinct_indices(t.shape[d])
    builder.view_step(
        f"{a.name}.index_add_({d}, torch.tensor({literal(indices)}), "
        f"{a.name}.narrow({d}, 0, {len(indices)}).clone())",
        a,
    )
    return True


def _setitem(builder: Builder, a: Value) -> bool:
    """``a[1:] = a[:-1]`` as one statement: the step is the slice written."""
    t = a.tensor
    if t.dim() == 0 or t.shape[0] < 2:
        return False
    rest = t.shape[0] - 1
    builder.view_step(
        f"{a.name}.narrow(0, 1, {rest}).copy_({a.name}.narrow(0, 0, {rest}).clone())", a
    )
    return True


_WRITES: dict[str, Callable[[Builder, Value], bool]] = {
    "add_": partial(_from_partner, "add_"),
    "mul_": partial(_from_partner, "mul_"),
    "copy_": partial(_from_partner, "copy_"),
    "clamp_": _clamp,
    "masked_fill_": _masked_fill,
    "setitem": _setitem,
    "index_add_": _index_add,
    "neg_": _neg,
}


def in_place(builder: Builder, a: Value) -> bool:
    if builder.training or not a.writable:
        return False
    kind = builder.draw(st.sampled_from(list(_WRITES)))
    return _WRITES[kind](builder, a)
