"""Ops over windows of the last dimensions of a float tensor: pooling (1-d and 2-d, max, average
and adaptive) and interpolation (nearest, nearest-exact, linear and bilinear)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from hypothesis import strategies as st

from pytest_torchcompile.hunting.builder import Builder, Value, is_float

_FUNCTIONAL = "torch.nn.functional"


@dataclass(frozen=True)
class _Window:
    """What every window op is drawn with, whether it takes it or not."""

    kernel: int
    stride: int
    padding: int
    ceil: bool


def _leading(count: int) -> str:
    """Indexing that adds ``count`` leading dims of size 1."""
    return f"[{', '.join(['None'] * count)}]" if count else ""


def _taken_off(count: int) -> str:
    """Indexing that takes ``count`` leading dims of size 1 off again."""
    return f"[{', '.join(['0'] * count)}]" if count else ""


def _pooled(a: Value) -> tuple[str, str]:
    """``a`` as a 1-d pool takes it, and the indexing that takes its result back: a 1-d tensor
    gets a channel."""
    return (f"{a.name}[None]", "[0]") if a.tensor.dim() == 1 else (a.name, "")


def _max_pool(builder: Builder, a: Value, window: _Window) -> bool:
    dilation = builder.draw(st.integers(1, 2))
    if dilation * (window.kernel - 1) + 1 > a.tensor.shape[-1] + 2 * window.padding:
        return False
    pooled, unpooled = _pooled(a)
    builder.step(
        f"{_FUNCTIONAL}.max_pool1d({pooled}, {window.kernel}, {window.stride}, "
        f"{window.padding}, {dilation}, ceil_mode={window.ceil}){unpooled}",
        [a],
    )
    return True


def _avg_pool(builder: Builder, a: Value, window: _Window) -> bool:
    include = builder.draw(st.booleans())
    pooled, unpooled = _pooled(a)
    builder.step(
        f"{_FUNCTIONAL}.avg_pool1d({pooled}, {window.kernel}, {window.stride}, "
        f"{window.padding}, ceil_mode={window.ceil}, count_include_pad={include}){unpooled}",
        [a],
    )
    return True


def _adaptive(builder: Builder, a: Value, window: _Window) -> bool:
    which = builder.draw(st.sampled_from(["adaptive_avg_pool1d", "adaptive_max_pool1d"]))
    size = builder.draw(st.integers(1, a.tensor.shape[-1] + 2))
    pooled, unpooled = _pooled(a)
    builder.step(f"{_FUNCTIONAL}.{which}({pooled}, {size}){unpooled}", [a])
    return True


def _interpolate(builder: Builder, a: Value, window: _Window) -> bool:
    """Of the last dimension, after a batch and channels."""
    mode = builder.draw(st.sampled_from(["nearest", "linear", "nearest-exact"]))
    size = builder.draw(st.integers(1, 2 * a.tensor.shape[-1] + 1))
    corners = ", align_corners=True" if mode == "linear" and builder.draw(st.booleans()) else ""
    lead = 3 - a.tensor.dim()
    builder.step(
        f"{_FUNCTIONAL}.interpolate({a.name}{_leading(lead)}, size={size}, "
        f"mode={mode!r}{corners}){_taken_off(lead)}",
        [a],
    )
    return True


def _bilinear(builder: Builder, a: Value, window: _Window) -> bool:
    """Of the last two dimensions, after a batch and channels."""
    t = a.tensor
    if t.dim() < 2:
        return False
    mode = builder.draw(st.sampled_from(["nearest", "bilinear"]))
    height = builder.draw(st.integers(1, 2 * t.shape[-2] + 1))
    width = builder.draw(st.integers(1, 2 * t.shape[-1] + 1))
    corners = ", align_corners=True" if mode == "bilinear" and builder.draw(st.booleans()) else ""
    lead = 4 - t.dim()
    builder.step(
        f"{_FUNCTIONAL}.interpolate({a.name}{_leading(lead)}, size=({height}, {width}), "
        f"mode={mode!r}{corners}){_taken_off(lead)}",
        [a],
    )
    return True


def _pool2d(builder: Builder, a: Value, window: _Window) -> bool:
    """Of a 3-d tensor, read as (C, H, W)."""
    if a.tensor.dim() != 3 or a.tensor.shape[-2] < window.kernel:
        return False
    which = builder.draw(st.sampled_from(["max_pool2d", "avg_pool2d"]))
    builder.step(
        f"{_FUNCTIONAL}.{which}({a.name}, {window.kernel}, {window.stride}, {window.padding}, "
        f"ceil_mode={window.ceil})",
        [a],
    )
    return True


_WINDOWS: dict[str, Callable[[Builder, Value, _Window], bool]] = {
    "max_pool": _max_pool,
    "avg_pool": _avg_pool,
    "adaptive": _adaptive,
    "interpolate": _interpolate,
    "pool2d": _pool2d,
    "bilinear": _bilinear,
}


def window(builder: Builder, a: Value) -> bool:
    """Pooling and interpolation over the last dimensions of a float tensor of 1 to 3 dims, viewed
    with the leading dims each op takes and taken off its result again: 1-d pools read (C, L) or
    (N, C, L), 2-d pools a 3-d tensor as (C, H, W), ``interpolate`` a batch and channels before
    the last dimension (linear) or the last two (bilinear)."""
    t = a.tensor
    if not is_float(t) or not 1 <= t.dim() <= 3:
        return False
    kind = builder.draw(st.sampled_from(list(_WINDOWS)))
    kernel = builder.draw(st.integers(1, min(t.shape[-1], 4)))
    stride = builder.draw(st.integers(1, 3))
    padding = builder.draw(st.integers(0, kernel // 2))
    ceil = builder.draw(st.booleans())
    return _WINDOWS[kind](builder, a, _Window(kernel, stride, padding, ceil))
