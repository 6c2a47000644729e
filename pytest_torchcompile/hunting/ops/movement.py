"""Ops that view a tensor or move its elements: views (transpose, permute, diagonal, slices,
select, expand, reshape, unsqueeze), and ops that move, repeat or pad elements (roll, pad,
tril/triu, cat, repeat, repeat_interleave, unfold)."""

from __future__ import annotations

from collections.abc import Callable

from hypothesis import strategies as st

from pytest_torchcompile.hunting.builder import Builder, Value, is_float

_AlongDim = Callable[[Builder, Value, int], bool]
"""An op along a drawn dim: adds its step, or returns False where it does not apply."""


def _transpose(builder: Builder, a: Value, d: int) -> bool:
    if a.tensor.dim() < 2:
        return False
    e = builder.draw(st.integers(0, a.tensor.dim() - 1).filter(lambda e: e != d))
    builder.view_step(f"{a.name}.transpose({d}, {e})", a)
    return True


def _permute(builder: Builder, a: Value, d: int) -> bool:
    if a.tensor.dim() < 3:
        return False
    order = builder.draw(st.permutations(range(a.tensor.dim())))
    builder.view_step(f"{a.name}.permute({', '.join(map(str, order))})", a)
    return True


def _diagonal(builder: Builder, a: Value, d: int) -> bool:
    dims = a.tensor.dim()
    if dims < 2:
        return False
    builder.view_step(f"{a.name}.diagonal(0, {dims - 2}, {dims - 1})", a)
    return True


def _slice(builder: Builder, a: Value, d: int) -> bool:
    start = builder.draw(st.integers(0, a.tensor.shape[d] - 1))
    step = builder.draw(st.integers(1, 3))
    index = ", ".join([":"] * d + [f"{start}::{step}"])
    builder.view_step(f"{a.name}[{index}]", a)
    return True


def _narrow(builder: Builder, a: Value, d: int) -> bool:
    start = builder.draw(st.integers(0, a.tensor.shape[d] - 1))
    length = builder.draw(st.integers(1, a.tensor.shape[d] - start))
    builder.view_step(f"{a.name}.narrow({d}, {start}, {length})", a)
    return True


def _select(builder: Builder, a: Value, d: int) -> bool:
    if a.tensor.dim() < 2:
        return False
    builder.view_step(
        f"{a.name}.select({d}, {builder.draw(st.integers(0, a.tensor.shape[d] - 1))})", a
    )
    return True


def _flip(builder: Builder, a: Value, d: int) -> bool:
    builder.step(f"{a.name}.flip({d})", [a])
    return True


def _reshape(builder: Builder, a: Value, d: int) -> bool:
    builder.view_step(f"{a.name}.reshape(-1)", a)
    return True


def _expand(builder: Builder, a: Value, d: int) -> bool:
    if 1 not in a.tensor.shape:
        return False
    shape = [builder.draw(st.integers(2, 5)) if side == 1 else side for side in a.tensor.shape]
    # Expanded memory overlaps itself: nothing writes into it.
    builder.step(f"{a.name}.expand({', '.join(map(str, shape))})", [a], writable=False)
    return True


def _transposed_copy(builder: Builder, a: Value, d: int) -> bool:
    if a.tensor.dim() < 2:
        return False
    builder.step(f"{a.name}.transpose(0, {a.tensor.dim() - 1}).contiguous()", [a])
    return True


def _unsqueeze(builder: Builder, a: Value, d: int) -> bool:
    builder.view_step(f"{a.name}.unsqueeze({builder.draw(st.integers(0, a.tensor.dim()))})", a)
    return True


_VIEWS: dict[str, _AlongDim] = {
    "transpose": _transpose,
    "slice": _slice,
    "unsqueeze": _unsqueeze,
    "select": _select,
    "narrow": _narrow,
    "flip": _flip,
    "reshape": _reshape,
    "expand": _expand,
    "permute": _permute,
    "diagonal": _diagonal,
    "t_contiguous": _transposed_copy,
}
"""Views, and a flip and a transposed copy; one that does not apply falls back to unsqueeze."""


def view(builder: Builder, a: Value) -> bool:
    if a.tensor.dim() == 0:
        builder.view_step(f"{a.name}.unsqueeze(0)", a)
        return True
    kind = builder.draw(st.sampled_from(list(_VIEWS)))
    d = builder.dim(a.tensor)
    if not _VIEWS[kind](builder, a, d):
        _unsqueeze(builder, a, d)
    return True


def _roll(builder: Builder, a: Value, d: int) -> bool:
    side = a.tensor.shape[d]
    shift = builder.draw(st.integers(-side - 1, side + 1))
    builder.step(f"torch.roll({a.name}, {shift}, {d})", [a])
    return True


def _pad(builder: Builder, a: Value, d: int) -> bool:
    """Of the last dimension; negative sides crop, leaving at least one element."""
    crop = -((a.tensor.shape[-1] - 1) // 2)
    left = builder.draw(st.integers(crop, 3))
    right = builder.draw(st.integers(crop, 3))
    value = builder.scalar(a.tensor)
    builder.step(f"torch.nn.functional.pad({a.name}, ({left}, {right}), value={value})", [a])
    return True


def _pad_mode(builder: Builder, a: Value, d: int) -> bool:
    t = a.tensor
    if not is_float(t) or not 2 <= t.dim() <= 3:
        return False
    mode = builder.draw(st.sampled_from(["reflect", "replicate", "circular"]))
    bound = t.shape[-1] - 1 if mode == "reflect" else t.shape[-1]
    if bound < 1:
        return False
    left = builder.draw(st.integers(0, bound))
    right = builder.draw(st.integers(0, bound))
    builder.step(f"torch.nn.functional.pad({a.name}, ({left}, {right}), mode={mode!r})", [a])
    return True


def _triangle(builder: Builder, a: Value, d: int) -> bool:
    if a.tensor.dim() < 2:
        return False
    which = builder.draw(st.sampled_from(["tril", "triu"]))
    builder.step(f"{a.name}.{which}({builder.draw(st.integers(-2, 2))})", [a])
    return True


def _cat(builder: Builder, a: Value, d: int) -> bool:
    b = builder.pick([v for v in builder.values if v.tensor.shape == a.tensor.shape])
    builder.step(f"torch.cat([{a.name}, {b.name}], {d})", [a, b])
    return True


def _repeat(builder: Builder, a: Value, d: int) -> bool:
    times = [builder.draw(st.integers(1, 2)) for _ in range(a.tensor.dim())]
    builder.step(f"{a.name}.repeat({', '.join(map(str, times))})", [a])
    return True


def _repeat_interleave(builder: Builder, a: Value, d: int) -> bool:
    builder.step(f"{a.name}.repeat_interleave({builder.draw(st.integers(1, 3))}, {d})", [a])
    return True


def _unfold(builder: Builder, a: Value, d: int) -> bool:
    size = builder.draw(st.integers(1, a.tensor.shape[d]))
    step = builder.draw(st.integers(1, 3))
    # Windows that overlap share memory: nothing writes into them.
    builder.step(f"{a.name}.unfold({d}, {size}, {step})", [a], writable=False)
    return True


_REARRANGEMENTS: dict[str, _AlongDim] = {
    "roll": _roll,
    "pad": _pad,
    "tril": _triangle,
    "cat": _cat,
    "repeat": _repeat,
    "repeat_interleave": _repeat_interleave,
    "unfold": _unfold,
    "pad_mode": _pad_mode,
}


def rearrange(builder: Builder, a: Value) -> bool:
    """Ops that move, repeat or pad elements: roll, pad (negative sides crop), tril/triu,
    concatenation with a partner of its shape, repeat, repeat_interleave, unfold."""
    if a.tensor.dim() == 0:
        return False
    d = builder.dim(a.tensor)
    kind = builder.draw(st.sampled_from(list(_REARRANGEMENTS)))
    return _REARRANGEMENTS[kind](builder, a, d)
