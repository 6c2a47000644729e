"""Elementwise ops: unary forms by the kind of tensor they take, binary ops with the operands
each takes, ops with a scalar, ``where``, casts and integer dtype views."""

from __future__ import annotations

import re
from collections.abc import Callable

import torch
from hypothesis import strategies as st

from pytest_torchcompile.hunting.builder import Builder, Value, compatible, is_float, is_int
from pytest_torchcompile.hunting.program import ALL_DTYPES

# sin of a large value is noise at any precision short of fp64 (bf16's spacing at 16384 is 128):
# its argument is kept where rounding moves it little.
_FLOAT_UNARY = (
    "torch.sin({a}.clamp(-8, 8))",
    "torch.tanh({a})",
    "torch.sigmoid({a})",
    "torch.exp({a}.clamp(-6, 6))",
    "torch.log1p({a}.abs())",
    "torch.sqrt({a}.abs())",
    "torch.rsqrt({a}.abs() + 1)",
    "torch.erf({a})",
    "torch.floor({a})",
    "torch.round({a})",
    "torch.nn.functional.gelu({a})",
    "torch.atan({a})",
    "torch.reciprocal({a}.abs() + 0.5)",
    "{a} * {a}",
    "torch.trunc({a})",
    "torch.frac({a})",
    "torch.expm1({a}.clamp(-6, 6))",
    "torch.log2({a}.abs() + 1)",
    "torch.cos({a}.clamp(-8, 8))",
    "torch.asinh({a})",
    "torch.erfinv({a}.clamp(-0.875, 0.875))",
    "torch.lgamma({a}.abs() + 0.5)",
    "torch.sinc({a})",
    "torch.nn.functional.silu({a})",
    "torch.nn.functional.hardswish({a})",
    "torch.nn.functional.softplus({a}, beta=2, threshold=3)",
    "torch.nn.functional.elu({a})",
    "torch.nn.functional.leaky_relu({a}, 0.125)",
    "torch.nn.functional.mish({a})",
)
_NUMERIC_UNARY = (
    "torch.abs({a})",
    "torch.neg({a})",
    "torch.sign({a})",
    "{a}.clamp(-2, 3)",
    "torch.relu({a})",
    "{a} % 3",
    "{a} // 2",
    "{a} * {a}",
    "torch.fmod({a}, 3)",
    "{a} % -3",
    "torch.div({a}, -3, rounding_mode='floor')",
    "torch.div({a}, 3, rounding_mode='trunc')",
    "torch.nn.functional.hardtanh({a}, -1, 2)",
    "{a}.clamp(min=1)",
    "{a}.clamp(max=-1)",
)
_INTEGER_UNARY = ("torch.bitwise_not({a})", "{a} >> 1", "{a} & 5", "{a} | 2", "{a} ^ 3")
_BOOL_UNARY = ("torch.logical_not({a})", "{a} & True", "{a} ^ True")


def _unary_forms(t: torch.Tensor) -> tuple[str, ...]:
    if is_float(t):
        return _FLOAT_UNARY + _NUMERIC_UNARY
    if is_int(t):
        forms = _NUMERIC_UNARY + _INTEGER_UNARY
        if t.dtype != torch.uint8:
            return forms
        # A negative literal is outside uint8: eager and compiled code may convert it apart
        # (pytorch/pytorch#198071's family), a known disagreement rather than a finding.
        return tuple(form for form in forms if not re.search(r"[(,= ]-\d", form))
    return _BOOL_UNARY


def unary(builder: Builder, a: Value) -> bool:
    """Any tensor takes a unary op: the op every other falls back to."""
    forms = [form for form in _unary_forms(a.tensor) if builder.takes(form)]
    builder.step(builder.draw(st.sampled_from(forms)).format(a=a.name), [a])
    return True


def with_scalar(builder: Builder, a: Value) -> bool:
    op = builder.draw(st.sampled_from(["+", "*", "-", "/", "<", "=="]))
    if a.tensor.dtype == torch.bool and op == "-":
        op = "+"
    builder.step(f"{a.name} {op} {builder.scalar(a.tensor)}", [a])
    return True


_Operands = Callable[[torch.Tensor, torch.Tensor], bool]


def _any(a: torch.Tensor, b: torch.Tensor) -> bool:
    return True


def _no_bool(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Eager clamps no bool and divides none."""
    return torch.bool not in (a.dtype, b.dtype)


def _divisor(a: torch.Tensor, b: torch.Tensor) -> bool:
    """A uint8 ``b`` holding 255 is no divisor: ``b.abs() + 1`` wraps to 0, where eager raises
    and compiled code's result is undefined."""
    return _no_bool(a, b) and not (b.dtype == torch.uint8 and int(b.max()) == 255)


def _no_float(a: torch.Tensor, b: torch.Tensor) -> bool:
    return not (is_float(a) or is_float(b))


def _integers(a: torch.Tensor, b: torch.Tensor) -> bool:
    return is_int(a) and is_int(b)


def _floats(a: torch.Tensor, b: torch.Tensor) -> bool:
    return is_float(a) and is_float(b)


def _one_float_dtype(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Ops eager takes for two operands of one dtype only."""
    return a.dtype == b.dtype and is_float(a)


_BINARY: dict[str, tuple[str, _Operands]] = {
    "add": ("{a} + {b}", _any),
    "mul": ("{a} * {b}", _any),
    "sub": ("{a} - {b}", _no_bool),
    "maximum": ("torch.maximum({a}, {b})", _any),
    "minimum": ("torch.minimum({a}, {b})", _any),
    "div": ("{a} / ({b}.abs() + 1)", _divisor),
    "gt": ("{a} > {b}", _any),
    "eq": ("{a} == {b}", _any),
    "le": ("{a} <= {b}", _any),
    "ne": ("{a} != {b}", _any),
    "atan2": ("torch.atan2({a}, {b})", _floats),
    "bitwise_and": ("{a} & {b}", _no_float),
    "bitwise_or": ("{a} | {b}", _no_float),
    "bitwise_xor": ("{a} ^ {b}", _no_float),
    "floor_divide": ("{a} // ({b}.abs() + 1)", _divisor),
    "remainder": ("{a} % ({b}.abs() + 1)", _divisor),
    "fmod": ("torch.fmod({a}, {b}.abs() + 1)", _divisor),
    "div_trunc": ("torch.div({a}, {b}.abs() + 1, rounding_mode='trunc')", _divisor),
    "div_floor": ("torch.div({a}, -({b}.abs() + 1), rounding_mode='floor')", _divisor),
    "remainder_negative": ("{a} % -({b}.abs() + 1)", _divisor),
    "clamp_min": ("torch.clamp({a}, min={b})", _no_bool),
    "clamp_max": ("torch.clamp({a}, max={b})", _no_bool),
    "right_shift": ("{a} >> ({b} & 3)", _integers),
    # The sign of a NaN is not defined: of a computed one, it is what the code computing it gave.
    "copysign": ("torch.copysign({a}, {b}.nan_to_num())", _floats),
    "hypot": ("torch.hypot({a}, {b})", _one_float_dtype),
    "logaddexp": ("torch.logaddexp({a}, {b})", _floats),
    "xlogy": ("torch.xlogy({a}, {b}.abs() + 1)", _floats),
    "pow": ("torch.pow({a}.abs() + 0.5, {b}.clamp(-2, 2))", _floats),
    "lerp": ("torch.lerp({a}, {b}, 0.375)", _one_float_dtype),
}
"""Each binary op's form and the operands it takes."""


def binary(builder: Builder, a: Value) -> bool:
    partners = [v for v in builder.values if compatible(v.tensor.shape, a.tensor.shape)]
    b = builder.pick(partners)
    forms = [
        form
        for form, takes in _BINARY.values()
        if takes(a.tensor, b.tensor) and builder.takes(form)
    ]
    builder.step(builder.draw(st.sampled_from(forms)).format(a=a.name, b=b.name), [a, b])
    return True


def where(builder: Builder, a: Value) -> bool:
    shape = a.tensor.shape
    conditions = [
        v
        for v in builder.values
        if v.tensor.dtype == torch.bool and compatible(v.tensor.shape, shape)
    ]
    if not conditions:
        builder.step(f"torch.where({a.name} > 0, {a.name}, {builder.scalar(a.tensor)})", [a])
        return True
    condition = builder.pick(conditions)
    others = [
        v
        for v in builder.values
        if compatible(v.tensor.shape, shape) and compatible(v.tensor.shape, condition.tensor.shape)
    ]
    b = builder.pick(others)
    builder.step(f"torch.where({condition.name}, {a.name}, {b.name})", [condition, a, b])
    return True


def cast(builder: Builder, a: Value) -> bool:
    dtype = builder.draw(st.sampled_from(ALL_DTYPES))
    if is_float(a.tensor) and not dtype.is_floating_point and dtype != torch.bool:
        # A float out of an integer type's range converts to anything (undefined in C++).
        low = 0 if dtype == torch.uint8 else -100
        builder.step(f"torch.nan_to_num({a.name}).clamp({low}, 100).to({dtype})", [a])
    else:
        builder.step(f"{a.name}.to({dtype})", [a])
    return True


_VIEWED_AS = {torch.uint8: torch.int8, torch.int8: torch.uint8, torch.int16: torch.int16}


def dtype_view(builder: Builder, a: Value) -> bool:
    """A view of an integer tensor as another integer type of its size. Float tensors are not
    viewed: their fp64 reference widens them, after which the view means other bits (or another
    shape), and the check is left without a reference."""
    target = _VIEWED_AS.get(a.tensor.dtype)
    if target is None or a.tensor.dim() == 0:
        return False
    builder.step(f"{a.name}.view({target})", [a], writable=a.writable, differentiable=False)
    return True
