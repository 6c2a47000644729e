"""Hypothesis strategies for small torch programs, valid by construction.

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

import itertools
import linecache
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from hypothesis import strategies as st
from hypothesis.strategies import SearchStrategy

__all__ = ["Program", "filled", "programs"]

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

_SIDES = (1, 2, 3, 4, 5)
_WIDE_SIDES = (8, 16, 17, 31, 33, 64, 65)
"""Sides around the vector widths of CPU kernels (and their tails)."""
_LITERAL_ELEMENTS = 16
_FLOAT_BOUND = 4.0
_INT_BOUND = 8

_NAMESPACE: dict[str, Any] = {"torch": torch, "math": math, "inf": math.inf, "nan": math.nan}


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
        values = values * 2 * _FLOAT_BOUND - _FLOAT_BOUND
        if specials:
            edges = torch.tensor(special_values(dtype), dtype=torch.float64)
            which = torch.randint(0, 8 * len(edges), tuple(shape), generator=generator)
            values = torch.where(which < len(edges), edges[which.clamp(max=len(edges) - 1)], values)
        return values.to(dtype)
    low = 0 if dtype == torch.uint8 else -_INT_BOUND
    return torch.randint(low, _INT_BOUND + 1, tuple(shape), generator=generator).to(dtype)


_NAMESPACE["filled"] = filled


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
        return tuple(eval(source, dict(_NAMESPACE)) for source in self.input_sources)

    @property
    def fn(self) -> Callable[..., Any]:
        """The program as a function, compiled from its source (shown in tracebacks)."""
        filename = f"<program {abs(hash(self.source)):x}>"
        linecache.cache[filename] = (len(self.source), None, self.source.splitlines(True), filename)
        namespace = dict(_NAMESPACE)
        exec(compile(self.source, filename, "exec"), namespace)
        function: Callable[..., Any] = namespace["program"]
        return function

    def script(self) -> str:
        """A standalone script: the program, its inputs and the call."""
        names = ", ".join(f"x{index}" for index in range(len(self.input_sources)))
        inputs = "\n".join(
            f"x{index} = {source}" for index, source in enumerate(self.input_sources)
        )
        options = f"  # check with {self.options}" if self.options else ""
        # Only where an input is built by it: a script of small inputs needs only torch.
        filling = "from pytest_torchcompile.programs import filled\n" if "filled(" in inputs else ""
        return (
            f"from math import inf, nan\n\nimport torch\n{filling}\n{self.source}\n"
            f"{inputs}\nprogram({names}){options}\n"
        )

    def __repr__(self) -> str:
        return f"Program(\n{self.script()})"


@dataclass
class _Value:
    name: str
    tensor: torch.Tensor
    writable: bool
    """May be written in place: no expanded (self-overlapping) memory under it."""
    differentiable: bool


@dataclass
class _Builder:
    draw: st.DrawFn
    training: bool
    values: list[_Value] = field(default_factory=list)
    lines: list[str] = field(default_factory=list)
    read: set[str] = field(default_factory=set)
    counter: itertools.count[int] = field(default_factory=itertools.count)

    def step(
        self,
        expression: str,
        operands: Sequence[_Value],
        writable: bool = True,
        differentiable: bool = True,
    ) -> None:
        env = {**_NAMESPACE, **{value.name: value.tensor for value in self.values}}
        tensor = eval(expression, env)
        name = f"v{next(self.counter)}"
        self.lines.append(f"    {name} = {expression}")
        self.read.update(value.name for value in operands)
        grad = (
            differentiable
            and tensor.is_floating_point()
            and any(v.differentiable for v in operands)
        )
        self.values.append(_Value(name, tensor, writable, grad))

    def pick(self, candidates: Sequence[_Value]) -> _Value:
        # The latest value first: shrinking keeps a chain of steps rather than the inputs alone.
        return self.draw(st.sampled_from(list(reversed(candidates))))


def _differentiable(builder: _Builder, form: str) -> bool:
    """Whether a training program may take the op: autograd has no derivative of ``//``."""
    return not builder.training or "//" not in form


def _is_float(tensor: torch.Tensor) -> bool:
    return tensor.is_floating_point()


def _is_int(tensor: torch.Tensor) -> bool:
    return not tensor.is_floating_point() and tensor.dtype != torch.bool


def _broadcasts(shape: Sequence[int], into: Sequence[int]) -> bool:
    """``shape`` broadcasts to exactly ``into``."""
    if len(shape) > len(into):
        return False
    return all(
        side in (1, target) for side, target in zip(reversed(shape), reversed(into), strict=False)
    )


def _compatible(a: Sequence[int], b: Sequence[int]) -> bool:
    return all(x == y or 1 in (x, y) for x, y in zip(reversed(a), reversed(b), strict=False))


def _dim(builder: _Builder, tensor: torch.Tensor) -> int:
    return builder.draw(st.integers(0, tensor.dim() - 1))


def _literal(values: Sequence[Any]) -> str:
    return "[" + ", ".join(repr(value) for value in values) + "]"


def _nested(values: list[Any], shape: Sequence[int]) -> Any:
    if not shape:
        return values[0]
    size = math.prod(shape[1:])
    return [_nested(values[i * size : (i + 1) * size], shape[1:]) for i in range(shape[0])]


def _index_tensor(builder: _Builder, shape: Sequence[int], bound: int) -> str:
    count = math.prod(shape)
    values = builder.draw(st.lists(st.integers(0, bound - 1), min_size=count, max_size=count))
    return f"torch.tensor({_nested(values, shape)!r})"


def _distinct_indices(builder: _Builder, bound: int) -> list[int]:
    return builder.draw(
        st.lists(st.integers(0, bound - 1), min_size=1, max_size=bound, unique=True)
    )


def _scalar(builder: _Builder, tensor: torch.Tensor) -> str:
    if tensor.dtype == torch.bool:
        return repr(builder.draw(st.booleans()))
    if tensor.dtype == torch.uint8:
        return str(builder.draw(st.integers(0, 3)))
    return repr(
        builder.draw(
            st.sampled_from([2, -1, 0.5, 3, -2.5]) if _is_float(tensor) else st.integers(-3, 3)
        )
    )


# --- ops: each reads the drawn value ``a`` and adds one step, or returns False where it does not
# apply to ``a`` ------------------------------------------------------------------------------

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


def _unary(builder: _Builder, a: _Value) -> bool:
    t = a.tensor
    forms: tuple[str, ...]
    if _is_float(t):
        forms = _FLOAT_UNARY + _NUMERIC_UNARY
    elif _is_int(t):
        forms = _NUMERIC_UNARY + _INTEGER_UNARY
    else:
        forms = _BOOL_UNARY
    if t.dtype == torch.uint8:
        # A negative literal is outside uint8: eager and compiled code may convert it apart
        # (pytorch/pytorch#198071's family), a known disagreement rather than a finding.
        forms = tuple(form for form in forms if not re.search(r"[(,= ]-\d", form))
    form = builder.draw(st.sampled_from([form for form in forms if _differentiable(builder, form)]))
    builder.step(form.format(a=a.name), [a])
    return True


def _with_scalar(builder: _Builder, a: _Value) -> bool:
    op = builder.draw(st.sampled_from(["+", "*", "-", "/", "<", "=="]))
    if a.tensor.dtype == torch.bool and op == "-":
        op = "+"
    builder.step(f"{a.name} {op} {_scalar(builder, a.tensor)}", [a])
    return True


_BINARY = {
    "add": "{a} + {b}",
    "mul": "{a} * {b}",
    "sub": "{a} - {b}",
    "maximum": "torch.maximum({a}, {b})",
    "minimum": "torch.minimum({a}, {b})",
    "div": "{a} / ({b}.abs() + 1)",
    "gt": "{a} > {b}",
    "eq": "{a} == {b}",
    "le": "{a} <= {b}",
    "ne": "{a} != {b}",
    "atan2": "torch.atan2({a}, {b})",
    "bitwise_and": "{a} & {b}",
    "bitwise_or": "{a} | {b}",
    "bitwise_xor": "{a} ^ {b}",
    "floor_divide": "{a} // ({b}.abs() + 1)",
    "remainder": "{a} % ({b}.abs() + 1)",
    "fmod": "torch.fmod({a}, {b}.abs() + 1)",
    "div_trunc": "torch.div({a}, {b}.abs() + 1, rounding_mode='trunc')",
    "div_floor": "torch.div({a}, -({b}.abs() + 1), rounding_mode='floor')",
    "remainder_negative": "{a} % -({b}.abs() + 1)",
    "clamp_min": "torch.clamp({a}, min={b})",
    "clamp_max": "torch.clamp({a}, max={b})",
    "right_shift": "{a} >> ({b} & 3)",
    # The sign of a NaN is not defined: of a computed one, it is what the code computing it gave.
    "copysign": "torch.copysign({a}, {b}.nan_to_num())",
    "hypot": "torch.hypot({a}, {b})",
    "logaddexp": "torch.logaddexp({a}, {b})",
    "xlogy": "torch.xlogy({a}, {b}.abs() + 1)",
    "pow": "torch.pow({a}.abs() + 0.5, {b}.clamp(-2, 2))",
    "lerp": "torch.lerp({a}, {b}, 0.375)",
}
_DIVIDING = (
    "div",
    "floor_divide",
    "remainder",
    "fmod",
    "div_trunc",
    "div_floor",
    "remainder_negative",
)
_FLOATS_ONLY = ("atan2", "copysign", "hypot", "logaddexp", "xlogy", "pow")
_SAME_DTYPE = ("hypot", "lerp")
"""Ops eager takes for two operands of one dtype only."""


def _binary_allowed(name: str, a: torch.Tensor, b: torch.Tensor) -> bool:
    bools = a.dtype == torch.bool or b.dtype == torch.bool
    floats = _is_float(a) or _is_float(b)
    if name in _SAME_DTYPE:
        return a.dtype == b.dtype and _is_float(a)
    if name in _FLOATS_ONLY:
        return _is_float(a) and _is_float(b)
    if name.startswith("bitwise"):
        return not floats
    if name in _DIVIDING and b.dtype == torch.uint8 and int(b.max()) == 255:
        # ``b.abs() + 1`` wraps to 0: eager raises, compiled code's result is undefined.
        return False
    if name == "right_shift":
        return not floats and not bools
    # Eager clamps no bool and divides none.
    return not bools or name in ("add", "mul", "maximum", "minimum", "gt", "eq", "le", "ne")


def _binary(builder: _Builder, a: _Value) -> bool:
    partners = [v for v in builder.values if _compatible(v.tensor.shape, a.tensor.shape)]
    b = builder.pick(partners)
    names = [
        name
        for name in _BINARY
        if _binary_allowed(name, a.tensor, b.tensor) and _differentiable(builder, _BINARY[name])
    ]
    name = builder.draw(st.sampled_from(names))
    builder.step(_BINARY[name].format(a=a.name, b=b.name), [a, b])
    return True


def _where(builder: _Builder, a: _Value) -> bool:
    conditions = [
        v
        for v in builder.values
        if v.tensor.dtype == torch.bool and _compatible(v.tensor.shape, a.tensor.shape)
    ]
    if not conditions:
        builder.step(f"torch.where({a.name} > 0, {a.name}, {_scalar(builder, a.tensor)})", [a])
        return True
    condition = builder.pick(conditions)
    others = [
        v
        for v in builder.values
        if _compatible(v.tensor.shape, a.tensor.shape)
        and _compatible(v.tensor.shape, condition.tensor.shape)
    ]
    b = builder.pick(others)
    builder.step(f"torch.where({condition.name}, {a.name}, {b.name})", [condition, a, b])
    return True


def _cast(builder: _Builder, a: _Value) -> bool:
    dtype = builder.draw(st.sampled_from(ALL_DTYPES))
    name = str(dtype)
    t = a.tensor
    if _is_float(t) and not dtype.is_floating_point and dtype != torch.bool:
        # A float out of an integer type's range converts to anything (undefined in C++).
        low = 0 if dtype == torch.uint8 else -100
        builder.step(f"torch.nan_to_num({a.name}).clamp({low}, 100).to({name})", [a])
    else:
        builder.step(f"{a.name}.to({name})", [a])
    return True


def _dtype_view(builder: _Builder, a: _Value) -> bool:
    """A view of an integer tensor as another integer type of its size. Float tensors are not
    viewed: their fp64 reference widens them, after which the view means other bits (or another
    shape), and the check is left without a reference."""
    pairs = {torch.uint8: torch.int8, torch.int8: torch.uint8, torch.int16: torch.int16}
    target = pairs.get(a.tensor.dtype)
    if target is None or a.tensor.dim() == 0:
        return False
    builder.step(f"{a.name}.view({target})", [a], writable=a.writable, differentiable=False)
    return True


def _view(builder: _Builder, a: _Value) -> bool:
    t = a.tensor
    if t.dim() == 0:
        builder.step(f"{a.name}.unsqueeze(0)", [a], writable=a.writable)
        return True
    kinds = [
        "transpose",
        "slice",
        "unsqueeze",
        "select",
        "narrow",
        "flip",
        "reshape",
        "expand",
        "permute",
        "diagonal",
        "t_contiguous",
    ]
    kind = builder.draw(st.sampled_from(kinds))
    d = _dim(builder, t)
    if kind == "transpose" and t.dim() >= 2:
        e = builder.draw(st.integers(0, t.dim() - 1).filter(lambda e: e != d))
        builder.step(f"{a.name}.transpose({d}, {e})", [a], writable=a.writable)
    elif kind == "permute" and t.dim() >= 3:
        order = builder.draw(st.permutations(range(t.dim())))
        builder.step(f"{a.name}.permute({', '.join(map(str, order))})", [a], writable=a.writable)
    elif kind == "diagonal" and t.dim() >= 2:
        builder.step(
            f"{a.name}.diagonal(0, {t.dim() - 2}, {t.dim() - 1})", [a], writable=a.writable
        )
    elif kind == "slice":
        start = builder.draw(st.integers(0, t.shape[d] - 1))
        step = builder.draw(st.integers(1, 3))
        index = ", ".join([":"] * d + [f"{start}::{step}"])
        builder.step(f"{a.name}[{index}]", [a], writable=a.writable)
    elif kind == "narrow":
        start = builder.draw(st.integers(0, t.shape[d] - 1))
        length = builder.draw(st.integers(1, t.shape[d] - start))
        builder.step(f"{a.name}.narrow({d}, {start}, {length})", [a], writable=a.writable)
    elif kind == "select" and t.dim() >= 2:
        builder.step(
            f"{a.name}.select({d}, {builder.draw(st.integers(0, t.shape[d] - 1))})",
            [a],
            writable=a.writable,
        )
    elif kind == "flip":
        builder.step(f"{a.name}.flip({d})", [a])
    elif kind == "reshape":
        builder.step(f"{a.name}.reshape(-1)", [a], writable=a.writable)
    elif kind == "expand" and 1 in t.shape:
        shape = [builder.draw(st.integers(2, 5)) if side == 1 else side for side in t.shape]
        builder.step(f"{a.name}.expand({', '.join(map(str, shape))})", [a], writable=False)
    elif kind == "t_contiguous" and t.dim() >= 2:
        builder.step(f"{a.name}.transpose(0, {t.dim() - 1}).contiguous()", [a])
    else:
        builder.step(
            f"{a.name}.unsqueeze({builder.draw(st.integers(0, t.dim()))})", [a], writable=a.writable
        )
    return True


def _reduction(builder: _Builder, a: _Value) -> bool:
    t = a.tensor
    if t.dim() == 0:
        return False
    names = ["sum", "amax", "amin", "prod", "argmax", "argmin", "any", "all"]
    if _is_float(t):
        names += ["mean", "var", "std", "logsumexp", "norm", "softmax", "log_softmax"]
    if t.dtype == torch.bool:
        names = ["sum", "any", "all"]
    name = builder.draw(st.sampled_from(names))
    d = _dim(builder, t)
    keepdim = builder.draw(st.booleans())
    if name in ("softmax", "log_softmax"):
        builder.step(f"torch.{name}({a.name}, {d})", [a])
    elif name in ("var", "std"):
        builder.step(f"{a.name}.{name}({d}, correction=0, keepdim={keepdim})", [a])
    elif name == "logsumexp":
        builder.step(f"torch.logsumexp({a.name}, {d}, keepdim={keepdim})", [a])
    elif name == "norm":
        builder.step(f"torch.linalg.vector_norm({a.name}, dim={d})", [a])
    elif name in ("sum", "amax", "prod") and builder.draw(st.booleans()):
        builder.step(f"{a.name}.{name}()" if name != "amax" else f"{a.name}.amax((0,))", [a])
    else:
        builder.step(f"{a.name}.{name}({d}, keepdim={keepdim})", [a])
    return True


def _scan(builder: _Builder, a: _Value) -> bool:
    t = a.tensor
    if t.dim() == 0:
        return False
    names = ["cumsum", "cummax", "cummin"] + (
        ["cumprod", "logcumsumexp"] if _is_float(t) else ["cumprod"]
    )
    name = builder.draw(st.sampled_from(names))
    d = _dim(builder, t)
    if name in ("cummax", "cummin"):
        if t.dtype == torch.bool:
            return False
        builder.step(f"torch.{name}({a.name}, {d}).values", [a])
    elif name == "logcumsumexp" and t.dtype in (torch.float16, torch.bfloat16):
        builder.step(f"torch.logcumsumexp({a.name}.float(), {d})", [a])
    else:
        builder.step(f"torch.{name}({a.name}, {d})", [a])
    return True


def _matmul(builder: _Builder, a: _Value) -> bool:
    t = a.tensor
    if not _is_float(t) or t.dim() < 2:
        return False
    builder.step(f"{a.name} @ {a.name}.transpose(-1, -2)", [a])
    return True


def _indexing(builder: _Builder, a: _Value) -> bool:
    t = a.tensor
    if t.dim() == 0:
        return False
    d = _dim(builder, t)
    size = t.shape[d]
    kind = builder.draw(
        st.sampled_from(
            [
                "gather",
                "index_select",
                "getitem",
                "scatter_add",
                "scatter_reduce",
                "index_add",
                "index_put",
                "scatter",
                "take_along_dim",
            ]
        )
    )
    if kind in ("gather", "scatter_add", "scatter_reduce", "take_along_dim"):
        shape = [builder.draw(st.integers(1, side)) for side in t.shape]
        index = _index_tensor(builder, shape, size)
        if kind == "gather":
            builder.step(f"torch.gather({a.name}, {d}, {index})", [a])
        elif kind == "take_along_dim":
            # Broadcast against ``a`` on the other dimensions.
            shape = [
                side if i == d else builder.draw(st.sampled_from([t.shape[i], 1]))
                for i, side in enumerate(shape)
            ]
            index = _index_tensor(builder, shape, size)
            builder.step(f"torch.take_along_dim({a.name}, {index}, {d})", [a])
        # The source of a scatter as large as the index: autograd wants its gradient so.
        source = f"{a.name}[{', '.join(f':{side}' for side in shape)}]"
        if kind == "scatter_add":
            builder.step(f"{a.name}.scatter_add({d}, {index}, {source})", [a])
        else:
            reduce = builder.draw(
                st.sampled_from(
                    ["sum", "amax", "amin", "prod"] + (["mean"] if _is_float(t) else [])
                )
            )
            include = builder.draw(st.booleans())
            if t.dtype == torch.bool:
                return False
            builder.step(
                f"{a.name}.scatter_reduce({d}, {index}, {source}, {reduce!r}, include_self={include})",
                [a],
            )
        return True
    # ``index_put`` indexes the first dimension.
    indices = _distinct_indices(builder, t.shape[0] if kind == "index_put" else size)
    literal = f"torch.tensor({_literal(indices)})"
    if kind == "index_select":
        builder.step(f"{a.name}.index_select({d}, {literal})", [a])
    elif kind == "getitem":
        builder.step(f"{a.name}[{', '.join([':'] * d + [literal])}]", [a])
    elif kind == "index_add":
        if t.dtype == torch.bool:
            return False
        source = f"{a.name}.narrow({d}, 0, {len(indices)})"
        builder.step(f"{a.name}.index_add({d}, {literal}, {source})", [a])
    elif kind == "scatter":
        # Distinct indices along ``d`` in every column: a permutation's first rows.
        shape = list(t.shape)
        shape[d] = len(indices)
        index = (
            f"{literal}.reshape({', '.join(str(len(indices)) if i == d else '1' for i in range(t.dim()))})"
            f".expand({', '.join(map(str, shape))})"
        )
        builder.step(f"{a.name}.scatter({d}, {index}, {_scalar(builder, t)})", [a])
    else:
        accumulate = builder.draw(st.booleans()) and t.dtype != torch.bool
        values = f"{a.name}[{literal}].flip(0)"
        builder.step(f"{a.name}.index_put(({literal},), {values}, accumulate={accumulate})", [a])
    return True


def _writes_into(kind: str, source: torch.Tensor, target: torch.Tensor) -> bool:
    """Whether ``target.<kind>(source)`` is valid and well defined: ``source`` broadcasts to
    ``target``'s shape; ``copy_`` takes no float into an integer (out of range, anything); the
    arithmetic's result casts to ``target``'s dtype."""
    if not _broadcasts(source.shape, target.shape):
        return False
    if kind == "copy_":
        return not (_is_float(source) and not _is_float(target))
    if kind == "mul_" and target.dtype == torch.bool:
        return False
    return torch.can_cast(torch.result_type(target, source), target.dtype)


def _in_place(builder: _Builder, a: _Value) -> bool:
    t = a.tensor
    if builder.training or not a.writable:
        return False
    kind = builder.draw(
        st.sampled_from(
            ["add_", "mul_", "copy_", "clamp_", "masked_fill_", "setitem", "index_add_", "neg_"]
        )
    )
    if kind in ("add_", "mul_", "copy_"):
        partners = [
            v for v in builder.values if v.name != a.name and _writes_into(kind, v.tensor, t)
        ]
        if not partners:
            return False
        b = builder.pick(partners)
        # Eager refuses a source that overlaps the tensor written.
        shared = b.tensor.untyped_storage().data_ptr() == t.untyped_storage().data_ptr()
        builder.step(
            f"{a.name}.{kind}({b.name}{'.clone()' if shared else ''})", [a, b], writable=a.writable
        )
    elif kind == "clamp_" and t.dtype not in (torch.bool, torch.uint8):
        builder.step(f"{a.name}.clamp_(-2, 2)", [a], writable=a.writable)
    elif kind == "neg_" and t.dtype != torch.bool:
        builder.step(f"{a.name}.neg_()", [a], writable=a.writable)
    elif kind == "masked_fill_":
        masks = [
            v
            for v in builder.values
            if v.tensor.dtype == torch.bool and _broadcasts(v.tensor.shape, t.shape)
        ]
        if not masks:
            return False
        mask = builder.pick(masks)
        builder.step(
            f"{a.name}.masked_fill_({mask.name}, {_scalar(builder, t)})",
            [a, mask],
            writable=a.writable,
        )
    elif kind == "index_add_" and t.dim() >= 1 and t.dtype != torch.bool:
        d = _dim(builder, t)
        indices = _distinct_indices(builder, t.shape[d])
        builder.step(
            f"{a.name}.index_add_({d}, torch.tensor({_literal(indices)}), "
            f"{a.name}.narrow({d}, 0, {len(indices)}).clone())",
            [a],
            writable=a.writable,
        )
    elif kind == "setitem" and t.dim() >= 1 and t.shape[0] >= 2:
        # ``a[1:] = a[:-1]`` as one statement: the step is the slice written.
        builder.step(
            f"{a.name}.narrow(0, 1, {t.shape[0] - 1}).copy_({a.name}.narrow(0, 0, {t.shape[0] - 1}).clone())",
            [a],
            writable=a.writable,
        )
    else:
        return False
    return True


def _rearrange(builder: _Builder, a: _Value) -> bool:
    """Ops that move, repeat or pad elements: roll, pad (negative sides crop), tril/triu,
    concatenation with a partner of its shape, repeat, repeat_interleave, unfold."""
    t = a.tensor
    if t.dim() == 0:
        return False
    d = _dim(builder, t)
    side = t.shape[d]
    kind = builder.draw(
        st.sampled_from(
            ["roll", "pad", "tril", "cat", "repeat", "repeat_interleave", "unfold", "pad_mode"]
        )
    )
    if kind == "roll":
        shift = builder.draw(st.integers(-side - 1, side + 1))
        builder.step(f"torch.roll({a.name}, {shift}, {d})", [a])
    elif kind == "pad":
        # Of the last dimension; at least one element is left.
        crop = -((t.shape[-1] - 1) // 2)
        left = builder.draw(st.integers(crop, 3))
        right = builder.draw(st.integers(crop, 3))
        value = _scalar(builder, t)
        builder.step(f"torch.nn.functional.pad({a.name}, ({left}, {right}), value={value})", [a])
    elif kind == "pad_mode" and _is_float(t) and 2 <= t.dim() <= 3:
        mode = builder.draw(st.sampled_from(["reflect", "replicate", "circular"]))
        bound = t.shape[-1] - 1 if mode == "reflect" else t.shape[-1]
        if bound < 1:
            return False
        left = builder.draw(st.integers(0, bound))
        right = builder.draw(st.integers(0, bound))
        builder.step(f"torch.nn.functional.pad({a.name}, ({left}, {right}), mode={mode!r})", [a])
    elif kind == "tril" and t.dim() >= 2:
        which = builder.draw(st.sampled_from(["tril", "triu"]))
        builder.step(f"{a.name}.{which}({builder.draw(st.integers(-2, 2))})", [a])
    elif kind == "cat":
        partners = [v for v in builder.values if v.tensor.shape == t.shape]
        b = builder.pick(partners)
        builder.step(f"torch.cat([{a.name}, {b.name}], {d})", [a, b])
    elif kind == "repeat":
        times = [builder.draw(st.integers(1, 2)) for _ in range(t.dim())]
        builder.step(f"{a.name}.repeat({', '.join(map(str, times))})", [a])
    elif kind == "repeat_interleave":
        builder.step(f"{a.name}.repeat_interleave({builder.draw(st.integers(1, 3))}, {d})", [a])
    elif kind == "unfold":
        size = builder.draw(st.integers(1, side))
        step = builder.draw(st.integers(1, 3))
        builder.step(f"{a.name}.unfold({d}, {size}, {step})", [a], writable=False)
    else:
        return False
    return True


def _window(builder: _Builder, a: _Value) -> bool:
    """Pooling and interpolation over the last dimensions of a float tensor of 1 to 3 dims, viewed
    with the leading dims each op takes and taken off its result again: 1-d pools read (C, L) or
    (N, C, L), 2-d pools a 3-d tensor as (C, H, W), ``interpolate`` a batch and channels before
    the last dimension (linear) or the last two (bilinear)."""
    t = a.tensor
    if not _is_float(t) or not 1 <= t.dim() <= 3:
        return False
    length = t.shape[-1]
    kind = builder.draw(
        st.sampled_from(["max_pool", "avg_pool", "adaptive", "interpolate", "pool2d", "bilinear"])
    )
    kernel = builder.draw(st.integers(1, min(length, 4)))
    stride = builder.draw(st.integers(1, 3))
    padding = builder.draw(st.integers(0, kernel // 2))
    ceil = builder.draw(st.booleans())
    functional = "torch.nn.functional"
    # A 1-d tensor gets a channel for the 1-d pools.
    pooled, unpooled = (f"{a.name}[None]", "[0]") if t.dim() == 1 else (a.name, "")
    if kind == "max_pool":
        dilation = builder.draw(st.integers(1, 2))
        if dilation * (kernel - 1) + 1 > length + 2 * padding:
            return False
        builder.step(
            f"{functional}.max_pool1d({pooled}, {kernel}, {stride}, {padding}, {dilation}, "
            f"ceil_mode={ceil}){unpooled}",
            [a],
        )
    elif kind == "avg_pool":
        include = builder.draw(st.booleans())
        builder.step(
            f"{functional}.avg_pool1d({pooled}, {kernel}, {stride}, {padding}, "
            f"ceil_mode={ceil}, count_include_pad={include}){unpooled}",
            [a],
        )
    elif kind == "adaptive":
        which = builder.draw(st.sampled_from(["adaptive_avg_pool1d", "adaptive_max_pool1d"]))
        size = builder.draw(st.integers(1, length + 2))
        builder.step(f"{functional}.{which}({pooled}, {size}){unpooled}", [a])
    elif kind == "interpolate":
        mode = builder.draw(st.sampled_from(["nearest", "linear", "nearest-exact"]))
        size = builder.draw(st.integers(1, 2 * length + 1))
        corners = ", align_corners=True" if mode == "linear" and builder.draw(st.booleans()) else ""
        lead = 3 - t.dim()
        builder.step(
            f"{functional}.interpolate({a.name}{_leading(lead)}, size={size}, "
            f"mode={mode!r}{corners}){_taken_off(lead)}",
            [a],
        )
    elif kind == "bilinear" and t.dim() >= 2:
        mode = builder.draw(st.sampled_from(["nearest", "bilinear"]))
        height = builder.draw(st.integers(1, 2 * t.shape[-2] + 1))
        width = builder.draw(st.integers(1, 2 * length + 1))
        corners = (
            ", align_corners=True" if mode == "bilinear" and builder.draw(st.booleans()) else ""
        )
        lead = 4 - t.dim()
        builder.step(
            f"{functional}.interpolate({a.name}{_leading(lead)}, size=({height}, {width}), "
            f"mode={mode!r}{corners}){_taken_off(lead)}",
            [a],
        )
    elif kind == "pool2d" and t.dim() == 3 and t.shape[-2] >= kernel:
        which = builder.draw(st.sampled_from(["max_pool2d", "avg_pool2d"]))
        builder.step(
            f"{functional}.{which}({a.name}, {kernel}, {stride}, {padding}, ceil_mode={ceil})",
            [a],
        )
    else:
        return False
    return True


def _leading(count: int) -> str:
    """Indexing that adds ``count`` leading dims of size 1."""
    return f"[{', '.join(['None'] * count)}]" if count else ""


def _taken_off(count: int) -> str:
    """Indexing that takes ``count`` leading dims of size 1 off again."""
    return f"[{', '.join(['0'] * count)}]" if count else ""


def _order(builder: _Builder, a: _Value) -> bool:
    """Sorting and searching: values of sort, topk, kthvalue, median and msort, stable sorts'
    indices (the only indices ties leave well defined), bucketize and searchsorted."""
    t = a.tensor
    if t.dim() == 0 or t.dtype == torch.bool:
        return False
    d = _dim(builder, t)
    side = t.shape[d]
    kind = builder.draw(
        st.sampled_from(["sort", "argsort", "topk", "kthvalue", "median", "msort", "bucketize"])
    )
    descending = builder.draw(st.booleans())
    if kind == "sort":
        builder.step(f"torch.sort({a.name}, {d}, descending={descending}).values", [a])
    elif kind == "argsort":
        builder.step(f"torch.argsort({a.name}, dim={d}, descending={descending}, stable=True)", [a])
    elif kind == "topk":
        k = builder.draw(st.integers(1, side))
        builder.step(f"torch.topk({a.name}, {k}, {d}, largest={descending}).values", [a])
    elif kind == "kthvalue":
        builder.step(
            f"torch.kthvalue({a.name}, {builder.draw(st.integers(1, side))}, {d}).values", [a]
        )
    elif kind == "median":
        builder.step(f"torch.median({a.name}, {d}).values", [a])
    elif kind == "msort":
        builder.step(f"torch.msort({a.name})", [a])
    else:
        bounds = sorted(builder.draw(st.lists(st.integers(-6, 6), min_size=1, max_size=5)))
        right = builder.draw(st.booleans())
        boundaries = f"torch.tensor({_literal(bounds)}, dtype={t.dtype})"
        # Eager warns of a non-contiguous input (a copy); a NaN has no place among the bounds
        # that eager's binary search defines.
        values = f"{a.name}{'.nan_to_num()' if _is_float(t) else ''}.contiguous()"
        builder.step(f"torch.bucketize({values}, {boundaries}, right={right})", [a])
    return True


_OPS: tuple[Callable[[_Builder, _Value], bool], ...] = (
    _unary,
    _binary,
    _with_scalar,
    _reduction,
    _view,
    _cast,
    _where,
    _scan,
    _indexing,
    _in_place,
    _matmul,
    _dtype_view,
    _rearrange,
    _window,
    _order,
)


@st.composite
def _shape(draw: st.DrawFn, max_dims: int) -> tuple[int, ...]:
    dims = draw(st.integers(1, max_dims))
    sides = [draw(st.sampled_from(_SIDES)) for _ in range(dims)]
    if draw(st.integers(0, 3)) == 3:
        sides[draw(st.integers(0, dims - 1))] = draw(st.sampled_from(_WIDE_SIDES))
    return tuple(sides)


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
    own = (
        [1 if draw(st.integers(0, 3)) == 0 else side for side in shape[drop:]]
        if drop < len(shape)
        else []
    )
    dtype = draw(st.sampled_from(list(dtypes)))
    layout = draw(st.sampled_from(["contiguous", "transposed", "strided"]))
    base = list(own)
    view = ""
    if layout == "transposed" and len(own) >= 2:
        base[-1], base[-2] = base[-2], base[-1]
        view = f".transpose({len(own) - 2}, {len(own) - 1})"
    elif layout == "strided" and own:
        base[-1] *= 2
        view = f"[{', '.join([':'] * (len(own) - 1) + ['::2'])}]"
    count = math.prod(base)
    edges = dtype.is_floating_point and (
        draw(st.integers(0, 3)) == 3 if specials is None else specials
    )
    if count <= _LITERAL_ELEMENTS:
        if dtype == torch.bool:
            element: SearchStrategy[Any] = st.booleans()
        elif dtype.is_floating_point:
            plain = st.floats(-_FLOAT_BOUND, _FLOAT_BOUND, width=16).map(lambda x: x + 0.0)
            edge = st.sampled_from(special_values(dtype))
            # One in eight a special value; shrinking goes to the plain ones.
            element = (
                st.integers(0, 7).flatmap(lambda k: edge if k == 7 else plain) if edges else plain
            )
        else:
            element = st.integers(0 if dtype == torch.uint8 else -_INT_BOUND, _INT_BOUND)
        values = draw(st.lists(element, min_size=count, max_size=count))
        return f"torch.tensor({_nested(values, base)!r}, dtype={dtype}){view}"
    seed = draw(st.integers(0, 2**16))
    fill = ", specials=True" if edges else ""
    return f"filled({tuple(base)!r}, {dtype}, seed={seed}{fill}){view}"


def _outputs(builder: _Builder, inputs: int) -> list[_Value]:
    """The values of steps no later step reads; the last step's where every one is read."""
    made = builder.values[inputs:]
    return [v for v in made if v.name not in builder.read] or made[-1:]


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
    count = draw(st.integers(1, max_inputs))
    # A training program differentiates with respect to its first input, at least.
    floats = [dtype for dtype in dtypes if dtype.is_floating_point] if training else []
    sources = [
        draw(_input(shape, floats or dtypes if index == 0 else dtypes, specials))
        for index in range(count)
    ]
    inputs = [eval(source, dict(_NAMESPACE)) for source in sources]
    floating = [index for index, tensor in enumerate(inputs) if tensor.is_floating_point()]
    train = bool(floating) and (draw(st.integers(0, 3)) == 3 if training is None else training)
    builder = _Builder(draw, train)
    builder.values = [
        _Value(f"x{index}", tensor, True, index in floating) for index, tensor in enumerate(inputs)
    ]
    # One step, then each further one while a drawn continuation is not 0 (three in four): as
    # in hypothesis' own lists, a step in the middle shrinks away with its continuation.
    for step in range(max_ops):
        if step and draw(st.integers(0, 3)) == 0:
            break
        a = builder.pick(builder.values)
        op = draw(st.sampled_from(_OPS))
        if not op(builder, a):
            _unary(builder, a)
    if train and not any(v.differentiable for v in _outputs(builder, count)):
        first = builder.values[floating[0]]
        builder.step(f"torch.sin({first.name}.clamp(-8, 8))", [first])
    outputs = [v.name for v in _outputs(builder, count)]
    # Inputs no step reads are left out, the others numbered anew.
    used = [index for index in range(count) if f"x{index}" in builder.read]
    names = {f"x{old}": f"x{new}" for new, old in enumerate(used)}
    body = [re.sub(r"\bx\d+\b", lambda match: names[match.group()], line) for line in builder.lines]
    args = ", ".join(names.values())
    source = (
        "\n".join([f"def program({args}):", *body, f"    return ({', '.join(outputs)},)"]) + "\n"
    )
    sources = [sources[index] for index in used]
    options: dict[str, Any] = {}
    if train:
        options["backward"] = True
    if dynamic or (dynamic is None and draw(st.integers(0, 4)) == 4):
        # At the drawn sizes only: a program's literal shapes hold for them.
        options.update(dynamic=True, sizes=())
    return Program(source, tuple(sources), options)
