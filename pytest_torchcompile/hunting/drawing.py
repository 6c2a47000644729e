"""The hypothesis strategy of small torch programs, valid by construction.

A drawn :class:`Program` is a plain function of tensors, written out as source code (printed
whole when an example fails), and the inputs to call it with::

    from hypothesis import given
    from pytest_torchcompile.strategies import programs

    @given(programs())
    def test_inductor(compile_accuracy, program):
        compile_accuracy(program.fn, *program.make_inputs(), **program.options)

A program is a sequence of steps over tensors of every dtype (bool, integers, fp16, bf16, fp32,
fp64): elementwise ops with broadcasting and type promotion, casts, views (transposes, strided
slices, expands, dtype views), in-place writes into inputs and intermediates, reductions, scans,
gathers, scatters and index ops. It returns every value no later step reads. Each step is
chosen among the ops valid for the values it reads, as eager would take them (shapes, dtypes,
what may be written in place), so every drawn program runs eagerly; hypothesis shrinks towards
fewer steps, fewer and smaller inputs and the first op of each list, so a failing example
shrinks to a small program. ``options`` holds the check's keywords the program needs: with
``training``, ``backward=True`` (gradients of the floating inputs; no step then writes in
place); with ``dynamic``, ``dynamic=True`` at the drawn sizes only.

Values stay where eager's result is well defined and well conditioned: floats in ``[-4, 4]``,
integers in ``[-8, 8]``, exponentials and sines of clamped values, divisions by ``|b| + 1``,
casts of floats to integers clamped into range first, scatters without a reduction only through
distinct indices, no negative literal for a uint8 tensor. With ``specials`` (drawn for one
floating input in four), an input also holds NaN, infinities, -0.0 and a subnormal, whose
results IEEE arithmetic and eager define; the sign of a NaN, which they do not, is read by no op.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import Any

import torch
from hypothesis import strategies as st
from hypothesis.strategies import SearchStrategy

from pytest_torchcompile.hunting.builder import Builder, Value, nested
from pytest_torchcompile.hunting.ops import OPS, unary
from pytest_torchcompile.hunting.program import (
    ALL_DTYPES,
    FLOAT_BOUND,
    INT_BOUND,
    Program,
    evaluated,
    special_values,
)

_SIDES = (1, 2, 3, 4, 5)
_WIDE_SIDES = (8, 16, 17, 31, 33, 64, 65)
"""Sides around the vector widths of CPU kernels (and their tails)."""
_LITERAL_ELEMENTS = 16


@st.composite
def _shape(draw: st.DrawFn, max_dims: int) -> tuple[int, ...]:
    dims = draw(st.integers(1, max_dims))
    sides = [draw(st.sampled_from(_SIDES)) for _ in range(dims)]
    if draw(st.integers(0, 3)) == 3:
        sides[draw(st.integers(0, dims - 1))] = draw(st.sampled_from(_WIDE_SIDES))
    return tuple(sides)


def _laid_out(draw: st.DrawFn, own: list[int]) -> tuple[list[int], str]:
    """The shape of a base tensor and the view of it that has shape ``own``: itself, a
    transpose of its last two dims or every second element of its last."""
    layout = draw(st.sampled_from(["contiguous", "transposed", "strided"]))
    base = list(own)
    if layout == "transposed" and len(own) >= 2:
        base[-1], base[-2] = base[-2], base[-1]
        return base, f".transpose({len(own) - 2}, {len(own) - 1})"
    if layout == "strided" and own:
        base[-1] *= 2
        return base, f"[{', '.join([':'] * (len(own) - 1) + ['::2'])}]"
    return base, ""


def _element(dtype: torch.dtype, edges: bool) -> SearchStrategy[Any]:
    """One element of a literal input; with ``edges``, one in eight a special value (shrinking
    goes to the plain ones)."""
    if dtype == torch.bool:
        return st.booleans()
    if not dtype.is_floating_point:
        return st.integers(0 if dtype == torch.uint8 else -INT_BOUND, INT_BOUND)
    plain = st.floats(-FLOAT_BOUND, FLOAT_BOUND, width=16).map(lambda x: x + 0.0)
    if not edges:
        return plain
    edge = st.sampled_from(special_values(dtype))
    return st.integers(0, 7).flatmap(lambda k: edge if k == 7 else plain)


@st.composite
def _input(
    draw: st.DrawFn,
    shape: tuple[int, ...],
    dtypes: Sequence[torch.dtype],
    specials: bool | None,
) -> str:
    """An input's expression: a literal or a seeded fill, in a drawn layout; a float one holds
    :func:`special_values` among its values where ``specials`` says so (None: one in four)."""
    # Broadcasting partners: some sides 1, some leading dims dropped.
    drop = draw(st.integers(0, len(shape)))
    own = [1 if draw(st.integers(0, 3)) == 0 else side for side in shape[drop:]]
    dtype = draw(st.sampled_from(list(dtypes)))
    base, view = _laid_out(draw, own)
    edges = dtype.is_floating_point and (
        draw(st.integers(0, 3)) == 3 if specials is None else specials
    )
    count = math.prod(base)
    if count <= _LITERAL_ELEMENTS:
        values = draw(st.lists(_element(dtype, edges), min_size=count, max_size=count))
        return f"torch.tensor({nested(values, base)!r}, dtype={dtype}){view}"
    seed = draw(st.integers(0, 2**16))
    fill = ", specials=True" if edges else ""
    return f"filled({tuple(base)!r}, {dtype}, seed={seed}{fill}){view}"


def _input_sources(
    draw: st.DrawFn,
    shape: tuple[int, ...],
    max_inputs: int,
    dtypes: Sequence[torch.dtype],
    training: bool | None,
    specials: bool | None,
) -> list[str]:
    count = draw(st.integers(1, max_inputs))
    # A training program differentiates with respect to its first input, at least.
    floats = [dtype for dtype in dtypes if dtype.is_floating_point] if training else []
    return [
        draw(_input(shape, floats or dtypes if index == 0 else dtypes, specials))
        for index in range(count)
    ]


def _draw_steps(builder: Builder, max_ops: int) -> None:
    """One step, then each further one while a drawn continuation is not 0 (three in four): as
    in hypothesis' own lists, a step in the middle shrinks away with its continuation."""
    for step in range(max_ops):
        if step and builder.draw(st.integers(0, 3)) == 0:
            return
        a = builder.pick(builder.values)
        op = builder.draw(st.sampled_from(OPS))
        if not op(builder, a):
            unary(builder, a)


def _outputs(builder: Builder, inputs: int) -> list[Value]:
    """The values of steps no later step reads; the last step's where every one is read."""
    made = builder.values[inputs:]
    return [v for v in made if v.name not in builder.read] or made[-1:]


def _keep_a_gradient(builder: Builder, inputs: int, first_floating: Value) -> None:
    """A training program returns a value with a gradient: where none of its outputs has one,
    a step of its first floating input is added."""
    if not any(v.differentiable for v in _outputs(builder, inputs)):
        builder.step(f"torch.sin({first_floating.name}.clamp(-8, 8))", [first_floating])


def _source(builder: Builder, inputs: int) -> tuple[str, list[int]]:
    """The program's source, and the inputs it takes: those no step reads are left out, the
    others numbered anew."""
    outputs = [v.name for v in _outputs(builder, inputs)]
    used = [index for index in range(inputs) if f"x{index}" in builder.read]
    names = {f"x{old}": f"x{new}" for new, old in enumerate(used)}
    body = [re.sub(r"\bx\d+\b", lambda match: names[match.group()], line) for line in builder.lines]
    header = f"def program({', '.join(names.values())}):"
    return "\n".join([header, *body, f"    return ({', '.join(outputs)},)"]) + "\n", used


def _options(draw: st.DrawFn, train: bool, dynamic: bool | None) -> dict[str, Any]:
    options: dict[str, Any] = {}
    if train:
        options["backward"] = True
    if dynamic or (dynamic is None and draw(st.integers(0, 4)) == 4):
        # At the drawn sizes only: a program's literal shapes hold for them.
        options.update(dynamic=True, sizes=())
    return options


@st.composite
def programs(
    draw: st.DrawFn,
    max_ops: int = 6,
    max_inputs: int = 3,
    max_dims: int = 3,
    dtypes: Sequence[torch.dtype] = ALL_DTYPES,
    training: bool | None = None,
    dynamic: bool | None = None,
    specials: bool | None = None,
) -> Program:
    """Small torch programs and their inputs (see the module's docstring).

    Args:
        max_ops: the most steps a program takes (at least one).
        max_inputs: the most input tensors (at least one).
        max_dims: the most dimensions of an input.
        dtypes: the dtypes inputs are drawn from (steps may cast to any).
        training: ``True``: every program is checked with ``backward=True`` (its first input
            is then floating, where ``dtypes`` holds a floating dtype); ``False``: none is;
            ``None``: drawn, for programs with a floating input.
        dynamic: likewise for ``dynamic=True``.
        specials: ``True``: every floating input holds NaNs, infinities, negative zeros and
            subnormals among its values (:func:`special_values`); ``False``: none does;
            ``None``: drawn, one floating input in four.
    """
    shape = draw(_shape(max_dims))
    sources = _input_sources(draw, shape, max_inputs, dtypes, training, specials)
    inputs = [evaluated(source) for source in sources]
    floating = [index for index, tensor in enumerate(inputs) if tensor.is_floating_point()]
    train = bool(floating) and (draw(st.integers(0, 3)) == 3 if training is None else training)
    builder = Builder(draw, train)
    builder.values = [
        Value(f"x{index}", tensor, True, index in floating) for index, tensor in enumerate(inputs)
    ]
    _draw_steps(builder, max_ops)
    if train:
        _keep_a_gradient(builder, len(inputs), builder.values[floating[0]])
    source, used = _source(builder, len(inputs))
    return Program(source, tuple(sources[index] for index in used), _options(draw, train, dynamic))
