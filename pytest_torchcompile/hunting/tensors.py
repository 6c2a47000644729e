"""Hypothesis strategies for model inputs: tensors of a shape, dtype, layout and value range,
and the positional arguments of a model built from them (see ``pytest_torchcompile.strategies``,
which users import them from).

Up to 16 elements per tensor are drawn one by one (all of a small tensor; evenly spread over a
larger one) and the rest come from a drawn seed, so generation stays fast while hypothesis can
still shrink the shape and the drawn values, and turn the random fill into a constant one where
the failure does not depend on it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal, TypeVar

import torch
from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument
from hypothesis.strategies import SearchStrategy

Layout = Literal["any", "contiguous", "non_contiguous", "channels_last"]

FLOAT_DTYPES: tuple[torch.dtype, ...] = (
    torch.float32,
    torch.float64,
    torch.float16,
    torch.bfloat16,
)
INTEGER_DTYPES: tuple[torch.dtype, ...] = (
    torch.uint8,
    torch.int8,
    torch.int16,
    torch.int32,
    torch.int64,
)
_SUPPORTED_DTYPES = frozenset((*FLOAT_DTYPES, *INTEGER_DTYPES, torch.bool))
_LAYOUTS = ("any", "contiguous", "non_contiguous", "channels_last")

# With |x| <= 4 even the worst case, a sum of 16,000 elements all equal to 4, stays below fp16's
# max (65504).
_DEFAULT_FLOAT_RANGE = (-4.0, 4.0)
_DEFAULT_INT_BOUND = 8
# torch.randint takes an exclusive upper bound, which must itself fit in int64.
_INT64_LIMIT = 2**62

_DRAWN_ELEMENTS = 16

_T = TypeVar("_T")


def shapes(
    min_dims: int = 1, max_dims: int = 4, min_side: int = 1, max_side: int = 16
) -> SearchStrategy[tuple[int, ...]]:
    """Shapes with ``min_dims..max_dims`` dimensions of ``min_side..max_side`` each.

    Shrinks towards fewer dimensions and smaller sides.
    """
    if not 0 <= min_dims <= max_dims:
        raise InvalidArgument(f"need 0 <= min_dims <= max_dims, got {min_dims}, {max_dims}")
    if not 0 <= min_side <= max_side:
        raise InvalidArgument(f"need 0 <= min_side <= max_side, got {min_side}, {max_side}")
    sides = st.integers(min_side, max_side)
    return st.lists(sides, min_size=min_dims, max_size=max_dims).map(tuple)


def tensors(
    *,
    shape: Sequence[int] | SearchStrategy[Sequence[int]] | None = None,
    dtype: torch.dtype | Sequence[torch.dtype] | SearchStrategy[torch.dtype] | None = None,
    min_dims: int = 1,
    max_dims: int = 4,
    min_side: int = 1,
    max_side: int = 16,
    layout: Layout = "any",
    elements: tuple[float, float] | None = None,
    device: str | torch.device = "cpu",
    requires_grad: bool = False,
) -> SearchStrategy[torch.Tensor]:
    """Tensors for model inputs.

    Args:
        shape: a fixed shape, a strategy of shapes, or ``None`` for
            ``shapes(min_dims, max_dims, min_side, max_side)`` (with exactly 4 dimensions when
            ``layout="channels_last"``).
        dtype: a dtype, a sequence to draw from, a strategy, or ``None`` for ``torch.float32``.
            Supported: ``FLOAT_DTYPES``, ``INTEGER_DTYPES`` and ``torch.bool``.
        layout: ``"contiguous"``; ``"non_contiguous"``, a transposed or step-sliced view of a
            larger tensor (non-contiguous whenever the tensor has more than one element);
            ``"channels_last"``, 4-d tensors in ``torch.channels_last`` memory format; or
            ``"any"``, one of those drawn per example.
        elements: inclusive ``(low, high)`` bounds on the values; must be finite in the dtype.
            Integer dtypes round the bounds inwards; float bounds are rounded to the dtype's
            precision. Defaults to ``(-4, 4)`` for floats, ``(-8, 8)`` for signed integers,
            ``(0, 8)`` for unsigned ones; ignored for ``torch.bool``.
        device: where the tensor lives; values are generated on the CPU, so they do not depend
            on the device.
        requires_grad: make the tensor a leaf that requires grad (floating dtypes only).
    """
    if layout not in _LAYOUTS:
        raise InvalidArgument(f"layout must be one of {_LAYOUTS}, got {layout!r}")
    return _tensors(
        _shape_strategy(shape, layout, min_dims, max_dims, min_side, max_side),
        _dtype_strategy(dtype, elements, requires_grad),
        layout,
        elements,
        torch.device(device),
        requires_grad,
    )


def _shape_strategy(
    shape: Sequence[int] | SearchStrategy[Sequence[int]] | None,
    layout: str,
    min_dims: int,
    max_dims: int,
    min_side: int,
    max_side: int,
) -> SearchStrategy[Sequence[int]]:
    if isinstance(shape, SearchStrategy):
        return shape
    if shape is not None:
        return st.just(_checked_shape(shape, layout))
    if layout != "channels_last":
        return shapes(min_dims, max_dims, min_side, max_side)
    if not min_dims <= 4 <= max_dims:
        raise InvalidArgument("layout='channels_last' needs 4-d shapes")
    return shapes(4, 4, min_side, max_side)


def _dtype_strategy(
    dtype: torch.dtype | Sequence[torch.dtype] | SearchStrategy[torch.dtype] | None,
    elements: tuple[float, float] | None,
    requires_grad: bool,
) -> SearchStrategy[torch.dtype]:
    if dtype is None:
        return st.just(torch.float32)
    if isinstance(dtype, torch.dtype):
        return st.just(_checked_dtype(dtype, elements, requires_grad))
    if isinstance(dtype, SearchStrategy):
        return dtype
    return st.sampled_from([_checked_dtype(d, elements, requires_grad) for d in dtype])


def model_args(*args: SearchStrategy[Any] | Any) -> SearchStrategy[tuple[Any, ...]]:
    """Positional arguments for a model, as a tuple: call it as ``model(*args)``.

    Each argument is a strategy or a plain value, passed as is (not copied: a model that
    mutates a constant tensor changes it for later examples).
    """
    return st.tuples(*(_as_strategy(arg) for arg in args))


def batched(
    build: Callable[[_T], Any], *, batch: SearchStrategy[_T] | None = None
) -> SearchStrategy[Any]:
    """Arguments that share a size: draw it from ``batch``, then draw what ``build(size)`` gives.

    ``build`` returns a strategy (its value is drawn), a tuple or list of strategies and values
    (drawn as a tuple, as with :func:`model_args`) or a mapping of them (drawn as a dict).
    ``batch`` defaults to ``st.integers(1, 8)``; it can draw anything, e.g. a tuple of sizes.
    Shrinking reduces the shared size like any other drawn value.
    """
    sizes: SearchStrategy[Any] = st.integers(1, 8) if batch is None else batch
    return sizes.flatmap(lambda size: _from_built(build(size)))


def _as_strategy(value: Any) -> SearchStrategy[Any]:
    return value if isinstance(value, SearchStrategy) else st.just(value)


def _from_built(built: Any) -> SearchStrategy[Any]:
    if isinstance(built, SearchStrategy):
        return built
    if isinstance(built, Mapping):
        return st.fixed_dictionaries({key: _as_strategy(value) for key, value in built.items()})
    if isinstance(built, tuple | list):
        return model_args(*built)
    raise InvalidArgument(
        f"batched(build): build must return a strategy, tuple, list or dict, got {built!r}"
    )


def _checked_shape(shape: Sequence[int], layout: str) -> tuple[int, ...]:
    checked = tuple(shape)
    if not all(isinstance(side, int) and side >= 0 for side in checked):
        raise InvalidArgument(f"shape must be a sequence of non-negative ints, got {shape!r}")
    if layout == "channels_last" and len(checked) != 4:
        raise InvalidArgument(f"layout='channels_last' needs a 4-d shape, got {checked}")
    return checked


def _checked_dtype(
    dtype: torch.dtype, elements: tuple[float, float] | None, requires_grad: bool
) -> torch.dtype:
    if dtype not in _SUPPORTED_DTYPES:
        raise InvalidArgument(
            f"unsupported dtype {dtype}; use one of {sorted(map(str, _SUPPORTED_DTYPES))}"
        )
    if requires_grad and not dtype.is_floating_point:
        raise InvalidArgument(f"requires_grad=True needs a floating dtype, got {dtype}")
    _value_range(dtype, elements)
    return dtype


def _value_range(
    dtype: torch.dtype, elements: tuple[float, float] | None
) -> tuple[float, float] | tuple[int, int]:
    """Inclusive bounds for ``dtype``'s values, checked against what the dtype can hold."""
    if dtype == torch.bool:
        return 0, 1
    if dtype.is_floating_point:
        low, high = (
            _DEFAULT_FLOAT_RANGE if elements is None else (float(elements[0]), float(elements[1]))
        )
        limit = torch.finfo(dtype).max
        if not -limit <= low <= high <= limit:
            raise InvalidArgument(f"elements={elements} are not finite, ordered bounds in {dtype}")
        return low, high
    info = torch.iinfo(dtype)
    min_value, max_value = max(info.min, -_INT64_LIMIT), min(info.max, _INT64_LIMIT)
    if elements is None:
        return max(min_value, -_DEFAULT_INT_BOUND), _DEFAULT_INT_BOUND
    int_low, int_high = math.ceil(elements[0]), math.floor(elements[1])
    if not min_value <= int_low <= int_high <= max_value:
        raise InvalidArgument(
            f"elements={elements} hold no integers within [{min_value}, {max_value}] for {dtype}"
        )
    return int_low, int_high


@st.composite
def _tensors(
    draw: st.DrawFn,
    shape_strategy: SearchStrategy[Sequence[int]],
    dtype_strategy: SearchStrategy[torch.dtype],
    layout: str,
    elements: tuple[float, float] | None,
    device: torch.device,
    requires_grad: bool,
) -> torch.Tensor:
    shape = _checked_shape(draw(shape_strategy), layout)
    dtype = _checked_dtype(draw(dtype_strategy), elements, requires_grad)
    low, high = _value_range(dtype, elements)
    # Values are drawn before the layout and only for the visible elements, so a change of layout
    # while shrinking leaves the drawn values in place.
    flat = draw(_flat_values(math.prod(shape), dtype.is_floating_point, low, high))
    values = flat.reshape(shape).to(device=device, dtype=dtype)
    if layout == "any":
        # Listed simplest first, so shrinking settles on a contiguous tensor when it can.
        choices = ["contiguous", "non_contiguous"] + (["channels_last"] if len(shape) == 4 else [])
        layout = draw(st.sampled_from(choices))

    if layout == "non_contiguous":
        base_shape, view = draw(_non_contiguous_views(shape))
        # The elements the view skips stay zero, so a kernel that ignores the strides reads them.
        tensor = view(torch.zeros(base_shape, device=device, dtype=dtype))
        tensor.copy_(values)
    elif layout == "channels_last":
        tensor = values.contiguous(memory_format=torch.channels_last)
    else:
        tensor = values
    if requires_grad:
        tensor.requires_grad_()
    return tensor


def _identity(tensor: torch.Tensor) -> torch.Tensor:
    return tensor


@st.composite
def _non_contiguous_views(
    draw: st.DrawFn, shape: tuple[int, ...]
) -> tuple[tuple[int, ...], Callable[[torch.Tensor], torch.Tensor]]:
    """A larger base shape, and a view of a base tensor that has ``shape`` but not its strides."""
    # torch counts a tensor as contiguous whatever the stride of a dimension of size 1.
    wide = [dim for dim, side in enumerate(shape) if side > 1]
    if not wide:
        return shape, _identity
    base = list(shape)
    if len(wide) >= 2 and draw(st.booleans()):
        first = draw(st.sampled_from(wide[:-1]))
        second = draw(st.sampled_from([dim for dim in wide if dim > first]))
        base[first], base[second] = base[second], base[first]
        return tuple(base), lambda tensor: tensor.transpose(first, second)
    dim = draw(st.sampled_from(wide))
    base[dim] *= 2
    index = (slice(None),) * dim + (slice(None, None, 2),)
    return tuple(base), lambda tensor: tensor[index]


@st.composite
def _flat_values(
    draw: st.DrawFn, numel: int, floating: bool, low: float, high: float
) -> torch.Tensor:
    """``numel`` values in ``[low, high]``, as a 1-d float64 (``floating``) or int64 tensor."""
    wide_dtype = torch.float64 if floating else torch.int64
    element: SearchStrategy[Any] = (
        st.floats(low, high, allow_nan=False, allow_infinity=False)
        if floating
        else st.integers(int(low), int(high))
    )
    # Hypothesis shrinks towards fewer choices first, so their number must not fall as the shape
    # grows: a larger tensor draws as many elements as the largest small one, plus its fill.
    count = min(numel, _DRAWN_ELEMENTS)
    if numel == count:
        return torch.tensor(
            draw(st.lists(element, min_size=count, max_size=count)), dtype=wide_dtype
        )

    # 0 is the shrink target, so a failing example simplifies to a constant fill when the drawn
    # elements alone still fail; the other draws mostly give random fills. Drawn first so that
    # the shrinker tries it before it simplifies the drawn elements.
    constant = draw(st.integers(0, 15)) == 0
    generator = torch.Generator().manual_seed(draw(st.integers(0, 2**32 - 1)))
    if constant:
        flat = torch.full((numel,), min(max(0, low), high), dtype=wide_dtype)
    elif floating:
        weight = torch.rand(numel, generator=generator, dtype=torch.float64)
        # lerp rather than low + (high - low) * w: high - low can overflow for wide bounds.
        flat = (weight * high + (1 - weight) * low).clamp_(low, high)
    else:
        flat = torch.randint(
            int(low), int(high) + 1, (numel,), generator=generator, dtype=torch.int64
        )
    drawn = draw(st.lists(element, min_size=count, max_size=count))
    flat[torch.linspace(0, numel - 1, count).round().long()] = torch.tensor(drawn, dtype=wide_dtype)
    return flat
