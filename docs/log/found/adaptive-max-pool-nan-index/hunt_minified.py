# pytest-torchcompile repro: only torch is needed to run it.
# case:    program_2591 :: graph 0 (forward) from venv/lib/python3.11/site-packages/hypothesis/core.py:1001 (test)
# status:  accuracy (minified 15 -> 3 ops)
# ops:     3
# stage:   deviation appears in Inductor's lowering of aten.adaptive_max_pool2d
# env:     torch 2.15.0+cu132, python 3.11.7, cpu x86_64, triton 3.9.0
# run:     python repro.py   (exit 1: reproduced, 2: fails differently, 0: fixed,
#                             3: the repro itself cannot run)
#          pytest repro.py   (one test, marked inductor_repro)
# note:    minified by pytest-torchcompile (15 -> 3 ops in 6.2 s, 8 compiles): delta debugging (no single culprit was located); 1-minimal: without any one of its ops it no longer fails
# note:    the full form, not the compact one: its eager run gives other values than the plugin's

from __future__ import annotations

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
if __name__ == "__main__":
    # Python puts a script's directory first on sys.path: a file planted beside this one
    # (math.py, inspect.py, ...) must not stand in for the standard library or torch.
    sys.path[:] = [entry for entry in sys.path if os.path.abspath(entry or os.curdir) != HERE]

import contextlib
import copy
import enum
import importlib
import inspect
import math
import operator
import re
import warnings
import weakref
import torch
import torch._inductor.config
import torch.fx
from collections.abc import Callable, Sequence, Iterator
from dataclasses import dataclass, field
from typing import Any
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

# fmt: off
# A compact repro file embeds this function too, and stays within the line count of torch's own
# minified repro: kept as written.
def _laid_out(values: torch.Tensor, dtype: torch.dtype, shape: tuple[int, ...], stride: tuple[int, ...], device: str, offset: int) -> torch.Tensor:  # values (dense) laid out as the input was: compiled code may assume its size, stride and storage offset; a stride 0 dim shares its memory
    storage = torch.empty(offset + (1 + sum((n - 1) * s for n, s in zip(shape, stride, strict=True)) if all(shape) else 0), dtype=dtype, device=device)
    storage[torch.arange(storage.numel(), device=device).as_strided(shape, stride, offset).reshape(-1)] = values.to(dtype=dtype, device=device).reshape(-1)
    return torch.empty(0, dtype=dtype, device=device).set_(storage.untyped_storage(), offset, shape, stride)
# fmt: on

def _inline(
    values: Any,
    dtype: torch.dtype,
    shape: tuple[int, ...],
    stride: tuple[int, ...],
    device: str,
    requires_grad: bool,
    offset: int = 0,
) -> torch.Tensor:
    out = _laid_out(torch.tensor(values, dtype=dtype), dtype, shape, stride, device, offset)
    return out.requires_grad_(requires_grad)

def _load(
    name: str,
    dtype: torch.dtype,
    shape: tuple[int, ...],
    stride: tuple[int, ...],
    device: str,
    requires_grad: bool,
    offset: int = 0,
) -> torch.Tensor:
    saved = torch.load(os.path.join(HERE, "tensors", name + ".pt"), weights_only=True)
    return _laid_out(saved, dtype, shape, stride, device, offset).requires_grad_(requires_grad)

class _Proxy(torch.fx.Proxy):

    def __setitem__(self, key: Any, value: Any) -> None:
        self.tracer.create_proxy("call_function", operator.setitem, (self, key, value), {})

def _in_place(op: Callable[[Any, Any], Any]) -> Callable[[torch.fx.Proxy, Any], torch.fx.Proxy]:
    return lambda self, other: self.tracer.create_proxy("call_function", op, (self, other), {})

class _Factories(TorchFunctionMode):

    def __init__(self, tracer: torch.fx.Tracer) -> None:
        super().__init__()
        self.tracer = tracer

    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        result = func(*args, **kwargs)
        if _holds_proxy((args, kwargs)) or not isinstance(result, torch.Tensor):
            return result
        return self.tracer.create_proxy("call_function", func, args, kwargs)

def _holds_proxy(value: Any) -> bool:
    if isinstance(value, list | tuple):
        return any(_holds_proxy(item) for item in value)
    if isinstance(value, dict):
        return any(_holds_proxy(item) for item in value.values())
    return isinstance(value, torch.fx.Proxy)

def _trace(module: torch.nn.Module) -> torch.fx.GraphModule:

    class Tracer(torch.fx.Tracer):
        # Defined here: a graph module keeps the class of a tracer defined at module level, so it
        # would pickle by reference to this file, which another process does not import.
        proxy_buffer_attributes = True

        def proxy(self, node: torch.fx.Node) -> torch.fx.Proxy:
            return _Proxy(node, self)

    # Set here, not where the class is: the judging code that names the operators comes later in
    # the file.
    for name in IN_PLACE_OPERATORS - {"setitem", "delitem"}:
        setattr(_Proxy, f"__{name}__", _in_place(getattr(operator, name)))
    tracer = Tracer()
    with _Factories(tracer):
        graph = tracer.trace(module)
    for node in graph.nodes:
        if isinstance(
            node.type, str
        ):  # an annotation this file's postponed evaluation left a string
            node.type = None
    return torch.fx.GraphModule(module, graph)

def apply_inductor_config(source: str) -> list[str]:
    skipped = []
    for line in source.strip().splitlines():
        name = line.split("=", 1)[0].strip().removeprefix("torch._inductor.config.")
        owner: object = torch._inductor.config
        for part in name.split("."):
            if not hasattr(owner, part):
                skipped.append(name)
                break
            owner = getattr(owner, part)
        else:
            exec(line, globals())
    return skipped

INDUCTOR_CONFIG = r"""
torch._inductor.config.cpp.threads = 2
"""
SKIPPED_CONFIG = apply_inductor_config(INDUCTOR_CONFIG)

KIND = 'accuracy'
TOL = 0.001
CHECK_NON_FLOAT = True
NON_FLOAT_FAILURE = True
EXPECTED_ERROR = None
ERROR_PATTERN = None
GRAD_ENABLED = True
SYMBOLIC_SIZES = []
# Ops outside aten: (op, the module that registers it (None: torch), its sys.path entry)
REQUIRED_OPS = []
LEVEL = 'post_aot'
# The outputs Inductor was told the user sees (it keeps their traced strides); None: unmarked
VISIBLE_OUTPUTS = [0]



class Repro(torch.nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, unsqueeze_default_1):
        adaptive_max_pool2d_default = torch.ops.aten.adaptive_max_pool2d.default(unsqueeze_default_1, [1, 2]);  unsqueeze_default_1 = None
        getitem = adaptive_max_pool2d_default[0]
        getitem_1 = adaptive_max_pool2d_default[1];  adaptive_max_pool2d_default = None
        return (getitem, getitem_1)



def make_inputs():
    return [
        _inline([[[-2.974609375, 2.781342323134e-309, float('nan')]]], torch.float64, (1, 1, 3), (3, 3, 1), 'cpu', False),
    ]



# --- judging code (the plugin's own rule) ---

def clone_values(values: Sequence[Any], keep_grad: bool = False) -> list[Any]:
    return [
        (
            strided_copy(v).requires_grad_(keep_grad and v.requires_grad)
            if isinstance(v, torch.Tensor)
            else v
        )
        for v in values
    ]

def strided_copy(value: torch.Tensor) -> torch.Tensor:
    value = value.detach()
    if value.layout != torch.strided or type(value) is not torch.Tensor or value.is_quantized:
        return value.clone()
    extent = (
        1
        + sum((size - 1) * stride for size, stride in zip(value.shape, value.stride(), strict=True))
        if value.numel()
        else 0
    )
    span = value.new_empty(0).set_(
        value.untyped_storage(), 0, (value.storage_offset() + extent,), (1,)
    )
    return value.new_empty(0).set_(
        span.clone().untyped_storage(), value.storage_offset(), value.shape, value.stride()
    )

def traced_layout(gm: torch.fx.GraphModule, inputs: Sequence[Any]) -> list[Any] | None:
    traced = [node.meta.get("val") for node in gm.graph.nodes if node.op == "placeholder"]
    if len(traced) != len(inputs):
        return None
    relaid = list(inputs)
    for index, (value, fake) in enumerate(zip(inputs, traced, strict=True)):
        if not (
            isinstance(value, torch.Tensor)
            and isinstance(fake, torch.Tensor)
            and value.layout == torch.strided
            and fake.layout == torch.strided
        ):
            continue
        stride = tuple(fake.stride())
        if (
            not all(type(size) is int for size in (*fake.shape, *stride))
            or tuple(fake.shape) != tuple(value.shape)
            or stride == value.stride()
        ):
            continue
        copy = torch.empty_strided(value.shape, stride, dtype=value.dtype, device=value.device)
        relaid[index] = copy.copy_(value.detach()).requires_grad_(value.requires_grad)
    return relaid if any(new is not old for new, old in zip(relaid, inputs, strict=True)) else None

def widened(value: Any) -> Any:
    if not isinstance(value, torch.Tensor):
        return value
    if value.is_floating_point():
        return value.detach().to(torch.float64).requires_grad_(value.requires_grad)
    if value.is_complex():
        return value.detach().to(torch.complex128)
    return value.detach().clone()

def widened_copy(value: Any, keep_grad: bool) -> Any:
    wide = widened(value)
    if not isinstance(wide, torch.Tensor):
        return wide
    if wide.dtype == value.dtype and (wide.is_floating_point() or wide.is_complex()):
        return clone_values([wide], keep_grad)[0]
    return wide.requires_grad_(keep_grad and wide.requires_grad)

def draws_random(gm: Any) -> bool:
    graph = getattr(gm, "graph", None)
    tag = getattr(torch.Tag, "nondeterministic_seeded", None)  # a torch without it: none does
    return (
        graph is not None
        and tag is not None
        and any(
            node.op == "call_function" and tag in getattr(node.target, "tags", ())
            for node in graph.nodes
        )
    )

@contextlib.contextmanager
def seeded_alike(gm: Any) -> Iterator[None]:
    if not draws_random(gm):
        yield
        return
    with generators_kept():
        torch.manual_seed(0)
        yield

def rng_devices() -> list[int]:
    return list(range(torch.cuda.device_count())) if torch.cuda.is_initialized() else []

def rng_states() -> list[torch.Tensor]:
    return [torch.random.get_rng_state()] + [
        torch.cuda.get_rng_state(index) for index in rng_devices()
    ]

def set_rng_states(states: list[torch.Tensor]) -> None:
    torch.random.set_rng_state(states[0])
    for index, state in zip(rng_devices(), states[1:], strict=False):
        # A device-side error (an assert in a compiled kernel) leaves the device unusable to this
        # process: its generator cannot be set, and nothing can draw from it any more.
        with contextlib.suppress(RuntimeError):
            torch.cuda.set_rng_state(state, index)

@contextlib.contextmanager
def generators_kept() -> Iterator[None]:
    states = rng_states()
    try:
        yield
    finally:
        set_rng_states(states)

IN_PLACE_OPERATORS = frozenset(
    {
        "setitem",
        "delitem",
        "iadd",
        "iand",
        "iconcat",
        "ifloordiv",
        "ilshift",
        "imatmul",
        "imod",
        "imul",
        "ior",
        "ipow",
        "irshift",
        "isub",
        "itruediv",
        "ixor",
    }
)
"""The functions of ``operator`` that write into their first argument."""

def operator_name(target: Any) -> str | None:
    if getattr(target, "__module__", None) != "_operator":
        return None
    return getattr(target, "__name__", None)

def may_write(module: Callable[..., Any]) -> bool:
    return not isinstance(module, torch.fx.GraphModule) or may_write_inputs(module)

def may_write_inputs(gm: Any) -> bool:
    return any(writes_an_argument(node) for node in gm.graph.nodes)

def writes_an_argument(node: torch.fx.Node) -> bool:
    if node.op in ("call_method", "call_module"):
        return True
    if node.op != "call_function":
        return False
    name = operator_name(node.target)
    if name is not None:
        return name in IN_PLACE_OPERATORS
    schema = getattr(node.target, "_schema", None)
    return schema is None or any(
        argument.alias_info is not None and argument.alias_info.is_write
        for argument in schema.arguments
    )

def mutated_inputs(module: Any, inputs: Sequence[Any]) -> list[int]:
    if not may_write_inputs(module):
        return []
    args = clone_values(inputs)
    with torch.no_grad(), seeded_alike(module):
        module(*args)
    return [
        index
        for index, (before, after) in enumerate(zip(inputs, args, strict=True))
        if isinstance(before, torch.Tensor)
        and isinstance(after, torch.Tensor)
        and changed(before, after)
    ]

def changed(before: torch.Tensor, after: torch.Tensor) -> bool:
    before, after = before.detach(), after.detach()
    if before.shape != after.shape or before.dtype != after.dtype:
        return True
    if torch.equal(before, after):
        return False
    if not (before.is_floating_point() or before.is_complex()):
        return True
    return not bool(((before == after) | (before.isnan() & after.isnan())).all())

class FailureKind(enum.StrEnum):
    ACCURACY = "accuracy"
    """The compiled graph runs, and an output deviates beyond the fp64 rule."""
    COMPILE_ERROR = "compile_error"
    RUNTIME_ERROR = "runtime_error"
    EAGER_ERROR = "eager_error"
    """The graph fails when run eagerly on its inputs: nothing is said about the compiler."""
    CRASHED = "crashed"
    """The judging process died on the graph (a crash the case recorded, or the judging's own)."""
    TIMED_OUT = "timed_out"
    """No verdict came from the judging process in time."""
    JUDGE_ERROR = "judge_error"
    """The judging itself failed: never the failure a case recorded."""

FULL_TABLE_VARIABLE = "PYTEST_TORCHCOMPILE_FULL_TABLE"
"""Set (not "0"), a failure's table shows every row: a repro file reads it, and so does the
terminal's failure message."""

INCONCLUSIVE = "inconclusive"
"""The rule of an output that the fp64 rule fails but that no result in its dtype can be judged
by (an overflow at the edge of the dtype's range, or one eager itself made): it passes, as no evidence
of a compiler defect, and its detail says why."""

@dataclass(frozen=True)
class LeafResult:

    path: str
    shape: tuple[int, ...]
    dtype: str
    passed: bool
    rule: str
    rmse_compiled: float | None = None
    rmse_eager: float | None = None
    multiplier: float | None = None
    max_abs_error: float | None = None
    max_error_index: tuple[int, ...] | None = None
    detail: str = ""

    @property
    def ratio(self) -> float | None:
        if self.rmse_compiled is None or self.rmse_eager is None:
            return None
        if self.rmse_eager == 0.0:
            return 0.0 if self.rmse_compiled == 0.0 else math.inf
        return self.rmse_compiled / self.rmse_eager

def format_table(leaves: list[LeafResult], width: int | None = None) -> str:
    header = (
        "output",
        "shape",
        "dtype",
        "rule",
        "rmse(comp,fp64)",
        "rmse(eager,fp64)",
        "ratio",
        "max|err|",
        "at",
    )
    rows = [header]
    for leaf in leaves:
        ratio = leaf.ratio
        rows.append(
            (
                leaf.path,
                "x".join(str(s) for s in leaf.shape) or "scalar",
                leaf.dtype,
                leaf.rule + ("" if leaf.passed else " FAIL"),
                "-" if leaf.rmse_compiled is None else f"{leaf.rmse_compiled:.3e}",
                "-" if leaf.rmse_eager is None else f"{leaf.rmse_eager:.3e}",
                "-" if ratio is None else f"{ratio:.1f}",
                "-" if leaf.max_abs_error is None else f"{leaf.max_abs_error:.3e}",
                "-" if leaf.max_error_index is None else str(list(leaf.max_error_index)),
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    shown = list(range(len(header)))
    left_out = []
    # What a narrow terminal goes without, first to last (the repro file and the JSON report
    # keep every column).
    for name in ("at", "max|err|", "rmse(eager,fp64)", "rmse(comp,fp64)", "dtype", "shape"):
        if width is None or sum(widths[i] + 2 for i in shown) - 2 <= width:
            break
        shown.remove(header.index(name))
        left_out.append(name)
    lines = ["  ".join(row[i].ljust(widths[i]) for i in shown).rstrip() for row in rows]
    if left_out:
        lines.append(
            f"(left out at this width: {', '.join(reversed(left_out))}; in the repro file and "
            "the JSON report)"
        )
    details = [
        f"  {leaf.path}: {leaf.detail}" for leaf in leaves if leaf.detail and not leaf.passed
    ]
    return "\n".join(lines + details)

def summarized_leaves(
    leaves: list[LeafResult], passing_rows: int = 5
) -> tuple[list[LeafResult], int]:
    passing = [index for index, leaf in enumerate(leaves) if leaf.passed]
    if len(passing) <= passing_rows:
        return list(leaves), 0

    def closeness(index: int) -> float:
        ratio = leaves[index].ratio
        return ratio if ratio is not None and ratio == ratio else -1.0

    shown = set(sorted(passing, key=closeness, reverse=True)[:passing_rows])
    return [leaf for index, leaf in enumerate(leaves) if not leaf.passed or index in shown], len(
        passing
    ) - passing_rows

def shown_table(leaves: list[LeafResult], width: int | None = None) -> str:
    if os.environ.get(FULL_TABLE_VARIABLE, "") not in ("", "0"):
        return format_table(leaves, width)
    shown, left_out = summarized_leaves(leaves)
    table = format_table(shown, width)
    return table + (
        f"\n({left_out} more outputs pass; {FULL_TABLE_VARIABLE}=1 shows every row)"
        if left_out
        else ""
    )

LEGACY_TF32_WARNING = "Please use the new API settings to control TF32 behavior"
"""What torch warns, once per process, when the TF32 flags are read or set through the legacy API."""

@contextlib.contextmanager
def full_fp32_precision() -> Iterator[None]:
    with _legacy_tf32_api_quiet(), _matmul_in_fp32(), _cudnn_without_tf32():
        yield

def at_full_fp32(cuda: bool) -> bool:
    outside = _precision_flags(cuda)
    with full_fp32_precision():
        inside = _precision_flags(cuda)
    # A per-operation precision of "none" follows the global one, which is read beside it.
    return all(
        flag == full or "none" in (flag, full) for flag, full in zip(outside, inside, strict=True)
    )

def _precision_flags(cuda: bool) -> list[Any]:
    reads: list[Callable[[], Any]] = [
        torch.get_float32_matmul_precision,
        lambda: torch.backends.mkldnn.matmul.fp32_precision,  # type: ignore[attr-defined]
    ]
    if cuda:
        reads += [
            lambda: torch.backends.cudnn.allow_tf32,
            lambda: torch.backends.cuda.matmul.allow_tf32,
            lambda: torch.backends.cudnn.conv.fp32_precision,  # type: ignore[attr-defined]
            lambda: torch.backends.cuda.matmul.fp32_precision,
        ]
    flags = []
    with _legacy_tf32_api_quiet():
        for read in reads:
            try:
                flags.append(read())
            except (AttributeError, RuntimeError):
                flags.append(None)
    return flags

@contextlib.contextmanager
def _legacy_tf32_api_quiet() -> Iterator[None]:
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=LEGACY_TF32_WARNING, category=UserWarning)
        yield

@contextlib.contextmanager
def _fp32_precision(owners: Sequence[Any], precision: str | None) -> Iterator[None]:
    owners = [owner for owner in owners if hasattr(owner, "fp32_precision")]
    saved = [owner.fp32_precision for owner in owners]
    try:
        if precision is not None:
            for owner in owners:
                owner.fp32_precision = precision
        yield
    finally:
        for owner, previous in zip(owners, saved, strict=True):
            owner.fp32_precision = previous

def _legacy_tf32_flags_readable(read: Callable[[], Any]) -> bool:
    try:
        read()
    except RuntimeError:
        return False
    return True

def _cudnn_without_tf32() -> contextlib.AbstractContextManager[None]:
    cudnn = torch.backends.cudnn
    if not _legacy_tf32_flags_readable(lambda: cudnn.allow_tf32):
        return _fp32_precision([getattr(cudnn, "conv", None)], "ieee")
    # The flags context manager works while flags are frozen; None leaves a flag as it is. The
    # per-operation precision goes to "ieee" too: left unset, it inherits a "tf32" set for all.
    flags = dict.fromkeys(inspect.signature(cudnn.flags).parameters)
    flags["allow_tf32"] = False
    if "fp32_precision" in flags:
        flags["fp32_precision"] = "ieee"
    return cudnn.flags(**flags)

@contextlib.contextmanager
def _matmul_in_fp32() -> Iterator[None]:
    owners = [torch.backends.cuda.matmul, getattr(torch.backends.mkldnn, "matmul", None)]
    if not _legacy_tf32_flags_readable(torch.get_float32_matmul_precision):
        with _fp32_precision(owners, "ieee"):
            yield
        return
    saved = torch.get_float32_matmul_precision()
    # set_float32_matmul_precision overwrites the per-operation settings: they are put back after.
    with _fp32_precision(owners, None):
        torch.set_float32_matmul_precision("highest")
        try:
            yield
        finally:
            torch.set_float32_matmul_precision(saved)

# fmt: off
# Embedded in compact repro files (repros/compact.py), which stay within the line count of
# torch's own minified repro: kept as written.
def leaf_verdict(compiled: torch.Tensor, eager: torch.Tensor, reference: torch.Tensor | None, tol: float,
                 check_non_float: bool = True) -> tuple[bool, str, tuple[float, ...]]:
    if not compiled.is_floating_point():  # where eager's value is not fp64's (it rounded a float it compared), compiled may give fp64's
        return (bool(((compiled == eager) | (compiled == (eager if reference is None else reference.to(compiled.dtype)))).all()), "exact", ()) if check_non_float else (True, "not checked (non-floating)", ())
    if compiled.numel() == 0:
        return True, "empty", ()
    # Compiled code's NaNs and infinities may differ from eager's where they are fp64's (eager overflowed): no failure.
    patterns = [torch.stack([t.isnan(), t == math.inf, t == -math.inf]) for t in (compiled, eager, reference) if t is not None]
    if bool((differs := (patterns[0] != patterns[1]).any(0)).any()) and not (reference is not None and torch.equal(patterns[0][:, differs], patterns[2][:, differs])
            and torch.allclose(reference.to(compiled.dtype)[differs], compiled[differs], atol=4e-2, rtol=4e-2, equal_nan=True)):
        return False, "non-finite pattern", ()
    if torch.allclose(compiled, eager, atol=tol, rtol=tol, equal_nan=True):
        return True, "allclose", ()
    finite = compiled.isfinite() & eager.isfinite()
    if reference is None:
        cosine = float(torch.nn.functional.cosine_similarity(
            compiled[finite].double().flatten(), eager[finite].double().flatten(), dim=0, eps=1e-6))
        return cosine >= 0.99, "cosine vs eager (no fp64 reference)", (cosine,)
    finite &= reference.isfinite()  # none finite in all three: no error (their NaNs and infinities are fp64's)
    errors = [float(torch.sqrt(torch.sum(torch.square(reference[finite].double() - value[finite].double())) / max(int(finite.sum()), 1)))
              for value in (compiled, eager)]
    small = eager.numel() < 1000 or (eager.dim() == 4 and eager.shape[-1] == eager.shape[-2] == 1) or tol >= 2e-2
    multiplier = 3.0 if eager.dtype in (torch.float16, torch.bfloat16) or small else 2.0
    return errors[0] <= multiplier * errors[1] + tol / 10.0, "fp64 rmse", (*errors, multiplier)
# fmt: on

def precision_kept(eager: torch.Tensor, reference: torch.Tensor | None) -> bool:
    return (
        reference is not None
        and reference.dtype == eager.dtype != torch.float64
        and torch.equal(reference, eager)
    )

def within_noise(figures: tuple[float, ...], noise: float, tol: float) -> bool:
    compiled_error, eager_error, multiplier = figures
    return compiled_error <= multiplier * max(eager_error, noise) + tol / 10.0

RESOLUTION_EPSILONS = 2.0
"""How far from fp64 a half-precision result may be, in its format's epsilon times the rms of
the fp64 value, whatever eager's error: the format's resolution (see :func:`within_resolution`)."""

def within_resolution(
    compiled: torch.Tensor, reference: torch.Tensor, compiled_error: float
) -> float | None:
    if compiled.dtype not in (torch.float16, torch.bfloat16):
        return None
    finite = compiled.isfinite() & reference.isfinite()
    scale = (
        float(torch.sqrt(torch.mean(torch.square(reference[finite].double()))))
        if bool(finite.any())
        else 0.0
    )
    if scale == 0.0:
        return None
    units = compiled_error / (torch.finfo(compiled.dtype).eps * scale)
    return units if units <= RESOLUTION_EPSILONS else None

def inconclusive_reason(
    compiled: torch.Tensor,
    eager: torch.Tensor,
    reference: torch.Tensor | None,
    how: str,
    tol: float,
) -> str | None:
    if reference is None or how != "non-finite pattern":
        return None
    dtype = str(eager.dtype).replace("torch.", "")
    if _overflow_at_range_edge(compiled, eager, reference):
        return f"overflow at the edge of {dtype}'s range"
    overflowed = _overflowed_in_eager(compiled, eager, reference, tol)
    if overflowed:
        return (
            f"eager itself overflows in {dtype} ({overflowed} values non-finite where fp64 is finite); "
            "compiled differs only there and at the range's edge, and the rest is within the rule"
        )
    return None

def _overflowed_in_eager(
    compiled: torch.Tensor, eager: torch.Tensor, reference: torch.Tensor, tol: float
) -> int:
    eager_finite = eager.isfinite()
    broken = ~eager_finite & reference.isfinite()
    if not bool(broken.any()):
        return 0
    differs = non_finite_differs(compiled, eager)
    at_edge = eager_finite & (eager.double().abs() >= torch.finfo(eager.dtype).max / 2)
    # An infinity of the other sign than eager's, or than fp64's where eager is NaN, is a sign
    # flip, not a place the overflow landed.
    flipped = compiled.isinf() & torch.where(
        eager.isinf(),
        eager.sign() != compiled.sign(),
        eager.isnan() & (reference.sign() != compiled.sign()),
    )
    if bool((differs & (~(broken | at_edge) | flipped)).any()):
        return 0
    finite = compiled.isfinite() & eager_finite & reference.isfinite()
    if (
        bool(finite.any())
        and not leaf_verdict(compiled[finite], eager[finite], reference[finite], tol)[0]
    ):
        return 0
    return int(broken.sum())

def non_finite_differs(compiled: torch.Tensor, eager: torch.Tensor) -> torch.Tensor:
    patterns = [torch.stack([t.isnan(), t == math.inf, t == -math.inf]) for t in (compiled, eager)]
    return (patterns[0] != patterns[1]).any(dim=0)

def _overflow_at_range_edge(
    compiled: torch.Tensor, eager: torch.Tensor, reference: torch.Tensor
) -> bool:
    differs = non_finite_differs(compiled, eager)
    compiled_finite = compiled.isfinite()
    finite_side = torch.where(compiled_finite, compiled, eager).double()
    other_side = torch.where(compiled_finite, eager, compiled).double()
    edge = torch.finfo(eager.dtype).max / 2
    overflowed = (
        (compiled_finite ^ eager.isfinite())
        & other_side.isinf()
        & (other_side.sign() == finite_side.sign())
    )
    near_edge = (finite_side.abs() >= edge) | (
        (reference.abs() >= edge) & (reference.sign() == other_side.sign())
    )
    return bool((overflowed & (near_edge | reference.isnan()))[differs].all())

# fmt: off
# Embedded in compact repro files (repros/compact.py), which stay within the line count of
# torch's own minified repro: kept as written.
def error_signature(error: BaseException, max_chars: int | None = None) -> str:
    lines = str(error).strip().splitlines()
    headers = [index for index, line in enumerate(lines) if line.startswith("Traceback (most recent call last):")]
    if headers:
        raised = [line for line in lines[headers[-1] + 1:] if line and not line[0].isspace()]
        if raised:
            unqualified = re.sub(r"^(?:\w+\.)+(?=\w+(?::|$))", "", raised[0])
            return f"{type(error).__name__}: {unqualified[:max_chars]}"
    return f"{type(error).__name__}: {lines[0][:max_chars] if lines else ''}"

def normalized_error(signature: str) -> str:
    without_paths = re.sub(r"(?:[A-Za-z]:)?(?:[/\\][^\s/\\'\"]+)+", "PATH", signature)
    return re.sub(r"0x[0-9a-fA-F]+|\d+", "N", without_paths)
# fmt: on

def _worst_element(
    result: torch.Tensor, reference: torch.Tensor
) -> tuple[float | None, tuple[int, ...] | None]:
    if result.numel() == 0:
        return None, None
    result, reference = result.double(), reference.double()
    error = (result - reference).abs()
    error = torch.where(torch.isnan(error), torch.full_like(error, math.inf), error)
    # Equal infinities, and NaN against NaN, are no error.
    error[(result == reference) | (result.isnan() & reference.isnan())] = 0.0
    flat_index = int(torch.argmax(error.reshape(-1)))
    index = tuple(int(i) for i in torch.unravel_index(torch.tensor(flat_index), result.shape))
    return float(error.reshape(-1)[flat_index]), index

def _first_non_finite_difference(
    compiled: torch.Tensor, eager: torch.Tensor, reference: torch.Tensor | None
) -> str:
    differs = non_finite_differs(compiled, eager)
    if not bool(differs.any()):
        return ""
    where = tuple(int(i) for i in differs.nonzero()[0])
    values = [("compiled", compiled), ("eager", eager), ("fp64", reference)]
    shown = ", ".join(f"{name} {t[where].item():g}" for name, t in values if t is not None)
    return (
        f"; {int(differs.sum())} differ in being NaN or infinite, the first at {list(where)}: "
        f"{shown}"
    )

def compare_tensor(
    path: str,
    compiled: torch.Tensor,
    eager: torch.Tensor,
    reference: torch.Tensor | None,
    tol: float,
    check_non_float: bool = True,
    noise: float | None = None,
    noise_from: str | None = None,
) -> LeafResult:
    shape = tuple(eager.shape)
    dtype = str(eager.dtype).replace("torch.", "")
    # Judged where the compiled tensor is: a probe returns hundreds of activations, and copying
    # them to the host to judge them there cost a CNN's probe seconds. A device without float64
    # (MPS) is judged on the host.
    judged_on = compiled.device if compiled.device.type in ("cpu", "cuda") else torch.device("cpu")
    compiled = compiled.detach().to(judged_on)
    eager = eager.detach().to(judged_on)
    reference = reference.detach().to(judged_on) if reference is not None else None
    if tuple(compiled.shape) != shape or compiled.dtype != eager.dtype:
        gave = (
            f"compiled gave {tuple(compiled.shape)} {compiled.dtype}, eager {shape} {eager.dtype}"
        )
        if tuple(compiled.shape) != shape:
            return LeafResult(path, shape, dtype, False, "metadata", detail=gave)
        return _wrong_dtype(path, dtype, gave, compiled, eager, reference, tol)
    if compiled.is_complex():
        compiled, eager = torch.view_as_real(compiled), torch.view_as_real(eager)
        reference = torch.view_as_real(reference) if reference is not None else None
    kept = precision_kept(eager, reference)
    reference = None if kept else reference
    passed, how, figures = leaf_verdict(compiled, eager, reference, tol, check_non_float)
    how = (
        f"cosine vs eager (the fp64 run kept {dtype})" if kept and how.startswith("cosine") else how
    )
    if how in ("not checked (non-floating)", "empty", "allclose"):
        return LeafResult(path, shape, dtype, passed, how)
    # Compiled code's NaNs and infinities that differ from eager's and reach these rules are fp64's.
    as_fp64 = int(non_finite_differs(compiled, eager).sum()) if how == "fp64 rmse" else 0
    as_fp64_note = (
        f"{as_fp64} non-finite values differ from eager's as fp64's do" if as_fp64 else ""
    )
    if how == "exact":
        mismatched = int((compiled != eager).sum())
        worst, where = _worst_element(compiled, eager)
        return LeafResult(
            path,
            shape,
            dtype,
            passed,
            how,
            max_abs_error=worst,
            max_error_index=where,
            detail=(
                ""
                if not mismatched
                else f"{mismatched} of {eager.numel()} elements differ from eager's as fp64's do"
                if passed
                else f"{mismatched} of {eager.numel()} elements differ"
            ),
        )
    if how == "non-finite pattern":
        worst, where = _worst_element(compiled, eager)
        reason = inconclusive_reason(compiled, eager, reference, how, tol)
        return LeafResult(
            path,
            shape,
            dtype,
            reason is not None,
            how if reason is None else INCONCLUSIVE,
            max_abs_error=worst,
            max_error_index=where,
            detail=(
                f"{'' if reason is None else reason + '; '}compiled has "
                f"{int((~torch.isfinite(compiled)).sum())} non-finite values, eager {int((~torch.isfinite(eager)).sum())}"
                f"{_first_non_finite_difference(compiled, eager, reference)}"
            ),
        )
    if reference is None:
        worst, where = _worst_element(compiled, eager)
        return LeafResult(
            path,
            shape,
            dtype,
            passed,
            how,
            max_abs_error=worst,
            max_error_index=where,
            detail=f"cosine similarity {figures[0]:.5f}",
        )
    compiled_error, eager_error, multiplier = figures
    notes = [as_fp64_note] if as_fp64_note else []
    if not passed and noise is not None and noise > eager_error:
        passed = within_noise(figures, noise, tol)
        times = noise / max(eager_error, 1e-300)
        evaluation = (
            "the batch reversed, or channels-last inputs" if noise_from is None else noise_from
        )
        notes.append(
            f"measured against another valid eager evaluation's rmse {noise:.3e} ({evaluation}), "
            f"{times:.{0 if times >= 10 else 2}f}x eager's"
        )
    units = None if passed else within_resolution(compiled, reference, compiled_error)
    if units is not None:
        passed = True
        notes.append(
            f"within {dtype}'s resolution: compiled's rmse is {units:.2f} of its epsilons of the fp64 "
            f"value's rms (at most {RESOLUTION_EPSILONS:g})"
        )
    worst, where = _worst_element(compiled, reference.to(torch.float64))
    return LeafResult(
        path,
        shape,
        dtype,
        passed,
        how,
        rmse_compiled=compiled_error,
        rmse_eager=eager_error,
        multiplier=multiplier,
        max_abs_error=worst,
        max_error_index=where,
        detail="; ".join(notes),
    )

def _wrong_dtype(
    path: str,
    dtype: str,
    gave: str,
    compiled: torch.Tensor,
    eager: torch.Tensor,
    reference: torch.Tensor | None,
    tol: float,
) -> LeafResult:
    cast = compiled.to(eager.dtype)
    fits = (compiled.is_floating_point() and eager.is_floating_point()) or torch.equal(
        cast.to(compiled.dtype), compiled
    )
    common = eager.dtype if fits else torch.promote_types(compiled.dtype, eager.dtype)
    values = compare_tensor(
        path, compiled.to(common), eager.to(common), reference, tol, check_non_float=True
    )
    verdict = "match" if values.passed else f"differ ({values.detail or values.rule})"
    return LeafResult(
        path,
        values.shape,
        dtype,
        False,
        "metadata",
        rmse_compiled=values.rmse_compiled,
        rmse_eager=values.rmse_eager,
        multiplier=values.multiplier,
        max_abs_error=values.max_abs_error,
        max_error_index=values.max_error_index,
        detail=f"{gave}; as {str(common).replace('torch.', '')} the values {verdict}",
    )

def differing_elements(first: Any, second: Any) -> torch.Tensor | None:
    if (
        not isinstance(first, torch.Tensor)
        or not isinstance(second, torch.Tensor)
        or first.shape != second.shape
    ):
        return None
    differs = first != second
    if first.is_floating_point() or first.is_complex():
        differs &= ~(torch.isnan(first) & torch.isnan(second))
    return differs if bool(differs.any()) else None

def written_only(value: Any, unwritten: torch.Tensor | None) -> Any:
    if unwritten is None or not isinstance(value, torch.Tensor) or value.shape != unwritten.shape:
        return value
    return value.detach().masked_fill(unwritten.to(value.device), 0)

@contextlib.contextmanager
def float64_everywhere() -> Iterator[None]:
    low_precision = (torch.float16, torch.bfloat16, torch.float32)

    def widen(value: Any) -> Any:
        return torch.float64 if isinstance(value, torch.dtype) and value in low_precision else value

    reinterpreting = {torch.ops.aten.view.dtype}

    class Float64Mode(TorchDispatchMode):
        def __torch_dispatch__(
            self, func: Any, types: Any, args: Any = (), kwargs: Any = None
        ) -> Any:
            kwargs = kwargs or {}
            if func not in reinterpreting:
                args = tuple(widen(a) for a in args)
                kwargs = {k: widen(v) for k, v in kwargs.items()}
            return func(*args, **kwargs)

    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        with Float64Mode(), torch.autocast("cpu", enabled=False):
            if torch.cuda.is_available():
                with torch.autocast("cuda", enabled=False):
                    yield
            else:
                yield
    finally:
        torch.set_default_dtype(previous)

def nan_gradients_filled(
    call: Callable[..., Any], fill: float, filled: list[int]
) -> Callable[..., Any]:
    checked: dict[int, weakref.ReferenceType[torch.Tensor]] = {}

    def fill_at_nan(value: Any) -> None:
        if (
            not isinstance(value, torch.Tensor)
            or not value.requires_grad
            or not (value.is_floating_point() or value.is_complex())
        ):
            return
        seen = checked.get(id(value))
        if seen is not None and seen() is value:
            return
        checked[id(value)] = weakref.ref(value)
        nan = torch.isnan(value.detach())
        count = int(nan.sum())
        if count:
            value.register_hook(lambda grad: grad.masked_fill(nan, fill))
            filled.append(count)

    class NanGradientMode(TorchFunctionMode):
        def __torch_function__(
            self, func: Any, types: Any, args: Any = (), kwargs: Any = None
        ) -> Any:
            kwargs = kwargs or {}
            for value in tree_leaves((args, kwargs)):
                fill_at_nan(value)
            return func(*args, **kwargs)

    def watched(*args: Any, **kwargs: Any) -> Any:
        with NanGradientMode():
            return call(*args, **kwargs)

    return watched

@contextlib.contextmanager
def filling_unwritten(fill: float, allocated: list[int]) -> Iterator[None]:
    aten = torch.ops.aten
    allocating = {
        aten.empty,
        aten.empty_like,
        aten.empty_strided,
        aten.new_empty,
        aten.new_empty_strided,
        aten.empty_permuted,
    }
    whole = 0 if math.isnan(fill) else int(fill)

    def writes_out(func: Any) -> bool:
        # An out= overload writes into memory the caller gave: told by its schema (torch.Tag.out is
        # newer than 2.11), or by its name where the schema does not tell (out_arguments_missing).
        arguments = getattr(getattr(func, "_schema", None), "arguments", None)
        if arguments is None or not all(hasattr(argument, "is_out") for argument in arguments):
            return "out" in getattr(func, "_overloadname", "out")
        return any(argument.is_out for argument in arguments)

    class FillingMode(TorchDispatchMode):
        def __torch_dispatch__(
            self, func: Any, types: Any, args: Any = (), kwargs: Any = None
        ) -> Any:
            result = func(*args, **(kwargs or {}))
            if (
                func.overloadpacket in allocating
                and not writes_out(func)
                and isinstance(result, torch.Tensor)
                and result.numel()
            ):
                exact = result.is_floating_point() or result.is_complex()
                result.fill_(
                    fill if exact else bool(whole) if result.dtype == torch.bool else whole
                )
                allocated.append(result.numel())
            return result

    with FillingMode():
        yield

def run_graph(
    module: Callable[..., Any],
    inputs: Sequence[Any],
    backward: bool = False,
    mutated: Sequence[int] = (),
    copied: bool = False,
) -> list[Any]:
    if not backward:
        # A graph that writes into no argument runs on the inputs themselves: a copy of them
        # (a model's weights) would sit beside the copy the caller keeps.
        args = list(inputs) if copied or not may_write(module) else clone_values(inputs)
        with torch.no_grad():
            return [*module(*args), *(args[index] for index in mutated)]
    args = list(inputs) if copied else clone_values(inputs, keep_grad=True)
    written = [args[index] for index in mutated]
    with torch.enable_grad():
        outputs = list(module(*args))
        wrt = [a for a in args if isinstance(a, torch.Tensor) and a.requires_grad]
        floating = [o for o in outputs if isinstance(o, torch.Tensor) and o.requires_grad]
        if not floating:
            return [o.detach() if isinstance(o, torch.Tensor) else o for o in [*outputs, *written]]
        loss = torch.stack([o.float().sum() for o in floating]).sum()
        grads = torch.autograd.grad(loss, wrt, allow_unused=True)
    return (
        [o.detach() if isinstance(o, torch.Tensor) else o for o in outputs]
        + [g if g is not None else torch.zeros_like(a) for a, g in zip(wrt, grads, strict=True)]
        + [value.detach() for value in written]
    )

def reference_outputs(
    module: Callable[..., Any],
    inputs: Sequence[Any],
    backward: bool = False,
    mutated: Sequence[int] = (),
) -> tuple[list[Any], list[Any] | None]:
    eager, fp64, _ = reference_results(module, inputs, backward, mutated)
    return eager, fp64

def reference_results(
    module: Callable[..., Any],
    inputs: Sequence[Any],
    backward: bool = False,
    mutated: Sequence[int] = (),
) -> tuple[list[Any], list[Any] | None, Exception | None]:
    with seeded_alike(module):
        eager = run_graph(module, inputs, backward, mutated)
    with seeded_alike(module):
        return eager, *fp64_results(module, inputs, backward, mutated)

UNLIKE_FILLS = (float("nan"), 7.0)
"""What the two runs that find the results depending on something not a value fill it with (memory
no op wrote, a gradient at a NaN): unlike values (NaN spreads through nearly every op), in integer
tensors 0 and 7."""

def unwritten_elements(
    module: Callable[..., Any],
    inputs: Sequence[Any],
    backward: bool = False,
    mutated: Sequence[int] = (),
) -> list[torch.Tensor | None] | None:
    runs = []
    for fill in UNLIKE_FILLS:
        allocated: list[int] = []
        try:
            with seeded_alike(module), filling_unwritten(fill, allocated):
                runs.append(run_graph(module, inputs, backward, mutated))
        except Exception:
            return None
        if not allocated:
            return None
    return [differing_elements(first, second) for first, second in zip(*runs, strict=True)]

def holds_nan(values: Sequence[Any]) -> bool:
    return any(
        isinstance(value, torch.Tensor)
        and (value.is_floating_point() or value.is_complex())
        and bool(torch.isnan(value).any())
        for value in values
    )

def nan_dependent_gradients(
    module: Callable[..., Any],
    inputs: Sequence[Any],
    mutated: Sequence[int] = (),
    results: Sequence[Any] | None = None,
) -> list[torch.Tensor | None] | None:
    if results is not None and not holds_nan([*inputs, *results]):
        return None
    runs = []
    for fill in UNLIKE_FILLS:
        filled: list[int] = []
        try:
            with seeded_alike(module):
                runs.append(
                    run_graph(nan_gradients_filled(module, fill, filled), inputs, True, mutated)
                )
        except Exception:
            return None
        if not filled:
            return None
    return [differing_elements(first, second) for first, second in zip(*runs, strict=True)]

def either(
    first: Sequence[torch.Tensor | None] | None, second: Sequence[torch.Tensor | None] | None
) -> list[torch.Tensor | None] | None:
    if first is None or second is None:
        return None if first is None and second is None else list(first or second or ())
    return [
        a if b is None else b if a is None else a | b for a, b in zip(first, second, strict=True)
    ]

def fp64_outputs(
    module: Callable[..., Any],
    inputs: Sequence[Any],
    backward: bool = False,
    mutated: Sequence[int] = (),
) -> list[Any] | None:
    return fp64_results(module, inputs, backward, mutated)[0]

def fp64_results(
    module: Callable[..., Any],
    inputs: Sequence[Any],
    backward: bool = False,
    mutated: Sequence[int] = (),
) -> tuple[list[Any] | None, Exception | None]:
    try:
        with float64_everywhere():
            if isinstance(module, torch.fx.GraphModule) and not backward and not mutated:
                return run_graph(_widening_at_first_use(module), inputs, copied=True), None
            # Widened copies serve as the run's own: a second copy would double the fp64 inputs
            # (a graph's inputs hold a model's weights), the most memory a check needs.
            return run_graph(
                module, [widened_copy(v, backward) for v in inputs], backward, mutated, copied=True
            ), None
    except Exception as error:
        return None, error

def _widening_at_first_use(gm: torch.fx.GraphModule) -> torch.fx.GraphModule:
    graph = copy.deepcopy(gm.graph)
    order = {node: position for position, node in enumerate(graph.nodes)}
    for node in list(graph.find_nodes(op="placeholder")):
        if not node.users:
            continue
        with graph.inserting_before(min(node.users, key=order.__getitem__)):
            wide = graph.call_function(widened_copy, (node, False))
        node.replace_all_uses_with(wide, delete_user_cb=lambda user, wide=wide: user is not wide)
    return torch.fx.GraphModule(gm, graph)

# Imports inside functions: Dynamo's and Inductor's modules load when a compile needs them, as
# a test's own compile would load them, not with this module (their import-time warnings and
# state are the test's).

def compile_graph(gm: torch.fx.GraphModule, inputs: Sequence[Any]) -> Callable[..., Any]:
    from torch._inductor.compile_fx import compile_fx_inner

    compiled = compile_fx_inner(gm, list(inputs))

    def run(*args: Any) -> Any:
        return compiled(list(args))

    run.inductor_compiled = compiled  # type: ignore[attr-defined]
    return run

def compile_dynamo_graph(
    gm: torch.fx.GraphModule, inputs: Sequence[Any] = ()
) -> Callable[..., Any]:
    import torch._dynamo
    import torch._functorch.config

    del inputs  # compiled at the first call, for the grad mode of that call
    torch._dynamo.reset()
    compiled = torch.compile(gm, backend="inductor", fullgraph=True, dynamic=False)

    def run(*args: Any) -> Any:
        with torch._functorch.config.patch(enable_autograd_cache=False):
            return compiled(*args)

    return run

VISIBLE_OUTPUTS_KEY = "user_visible_output_idxs"

def visible_outputs(gm: torch.fx.GraphModule) -> list[int] | None:
    marked = gm.graph.find_nodes(op="output")[0].meta.get(VISIBLE_OUTPUTS_KEY)
    return None if marked is None else list(marked)

def with_visible_outputs(
    gm: torch.fx.GraphModule, outputs: Sequence[int] | None
) -> torch.fx.GraphModule:
    if outputs is not None:
        gm.graph.find_nodes(op="output")[0].meta[VISIBLE_OUTPUTS_KEY] = list(outputs)
    return gm

FIXED_EXIT, REPRODUCED_EXIT, FAILS_DIFFERENTLY_EXIT, BROKEN_EXIT = 0, 1, 2, 3
"""A repro's exit statuses: the failure is gone, it reproduces, the graph fails another way, the
repro itself cannot run (an op it calls is missing, its graph cannot be built, or its graph fails
eagerly on its own inputs): it then says nothing about the compiler."""

class ReproBroken(Exception):
    """A repro that cannot run here: its file does not load, an op it calls is missing, its graph
    cannot be built."""

POST_AOT = "post_aot"

DYNAMO = "dynamo"
"""Graph levels: what Inductor lowers, and what Dynamo captures before AOT autograd."""

@dataclass
class GraphVerdict:

    failure: FailureKind | None
    leaves: list[LeafResult] = field(default_factory=list)
    error: str | None = None
    reference: str = "fp64"

    @property
    def worst_ratio(self) -> float | None:
        ratios = [leaf.ratio for leaf in self.leaves if leaf.ratio is not None]
        return max(ratios) if ratios else None

def same_failure(
    verdict: GraphVerdict, kind: str, expected_error: str | None, pattern: str | None
) -> bool:
    if verdict.failure != kind:
        return False
    if kind == FailureKind.ACCURACY:
        return True
    if pattern:
        return verdict.error is not None and re.search(pattern, verdict.error) is not None
    if expected_error is None or verdict.error is None:
        return True
    return normalized_error(verdict.error) == normalized_error(expected_error)

def devices_of(values: Sequence[Any]) -> set[torch.device]:
    return {v.device for v in values if isinstance(v, torch.Tensor) and v.device.type != "cpu"}

def synchronize(devices: set[torch.device]) -> None:
    for waited in devices:
        if waited.type == "cuda":
            torch.cuda.synchronize(waited)

def differentiating(inputs: Sequence[Any]) -> bool:
    return torch.is_grad_enabled() and any(
        isinstance(v, torch.Tensor) and v.requires_grad for v in inputs
    )

def judges_backward(level: str, inputs: Sequence[Any]) -> bool:
    return level == DYNAMO and differentiating(inputs)

def compare_graph_outputs(
    outputs: Sequence[Any],
    eager: Sequence[Any],
    fp64: Sequence[Any] | None,
    tol: float,
    check_non_float: bool,
    name: str = "graph_out",
    unjudged: Sequence[torch.Tensor | None] | None = None,
    mutated: Sequence[int] = (),
) -> list[LeafResult]:
    if len(outputs) != len(eager):
        return [
            LeafResult(
                name,
                (),
                "",
                False,
                "metadata",
                detail=f"compiled returned {len(outputs)} results, eager {len(eager)}",
            )
        ]
    masks = list(unjudged) if unjudged is not None else [None] * len(eager)
    returned = len(eager) - len(mutated)
    paths = [f"{name}[{index}]" for index in range(returned)] + [
        mutated_input_path(index) for index in mutated
    ]
    return [
        compare_tensor(
            path,
            written_only(result, mask),
            written_only(expected, mask),
            written_only(fp64[index], mask) if fp64 is not None else None,
            tol,
            check_non_float,
        )
        for index, (path, result, expected, mask) in enumerate(
            zip(paths, outputs, eager, masks, strict=True)
        )
        if isinstance(expected, torch.Tensor) and isinstance(result, torch.Tensor)
    ]

def mutated_input_path(position: int) -> str:
    return f"graph_in[{position}] (mutated in place)"

def judge_graph(
    gm: torch.fx.GraphModule,
    inputs: Sequence[Any],
    tol: float,
    check_non_float: bool,
    references: tuple[list[Any], list[Any] | None] | None = None,
    compiler: Callable[[torch.fx.GraphModule, Sequence[Any]], Callable[..., Any]] | None = None,
    level: str = POST_AOT,
) -> GraphVerdict:
    with full_fp32_precision():
        return _judge(gm, inputs, tol, check_non_float, references, compiler, level)

def _judge(
    gm: torch.fx.GraphModule,
    inputs: Sequence[Any],
    tol: float,
    check_non_float: bool,
    references: tuple[list[Any], list[Any] | None] | None,
    compiler: Callable[[torch.fx.GraphModule, Sequence[Any]], Callable[..., Any]] | None,
    level: str,
) -> GraphVerdict:
    backward = judges_backward(level, inputs)
    try:
        mutated = mutated_inputs(gm, inputs)
        eager, fp64 = (
            references
            if references is not None
            else reference_outputs(gm, inputs, backward, mutated)
        )
    except Exception as error:
        return GraphVerdict(FailureKind.EAGER_ERROR, error=error_signature(error))
    try:
        if compiler is None:
            compiler = compile_dynamo_graph if level == DYNAMO else compile_graph
        compiled = compiler(gm, clone_values(inputs))
    except Exception as error:
        return GraphVerdict(FailureKind.COMPILE_ERROR, error=error_signature(error))
    try:
        # A torch-level graph compiles on its first call: errors there are the compiler's too.
        with seeded_alike(gm):
            outputs = run_graph(compiled, inputs, backward, mutated)
        synchronize(devices_of([*inputs, *outputs]))
    except Exception as error:
        return GraphVerdict(FailureKind.RUNTIME_ERROR, error=error_signature(error))
    unjudged = unwritten_elements(gm, inputs, backward, mutated)
    leaves = compare_graph_outputs(
        outputs, eager, fp64, tol, check_non_float, unjudged=unjudged, mutated=mutated
    )
    if backward and any(not leaf.passed for leaf in leaves):
        # Found only for a failing training graph: it costs two more forward and backward runs.
        through_nan = nan_dependent_gradients(gm, inputs, mutated, eager)
        if through_nan is not None:
            leaves = compare_graph_outputs(
                outputs,
                eager,
                fp64,
                tol,
                check_non_float,
                unjudged=either(unjudged, through_nan),
                mutated=mutated,
            )
    failed = any(not leaf.passed for leaf in leaves)
    return GraphVerdict(
        FailureKind.ACCURACY if failed else None,
        leaves,
        reference="fp64" if fp64 is not None else "cosine",
    )

def register_ops(required: Sequence[tuple[str, str | None, str | None]]) -> str | None:
    for qualname, module, search_path in required:
        namespace, name = qualname.split("::", 1)
        if module is not None and not _has_op(namespace, name):
            try:
                try:
                    importlib.import_module(module)
                except ModuleNotFoundError:
                    if not search_path or search_path in sys.path:
                        raise
                    sys.path.append(search_path)
                    importlib.import_module(module)
            except Exception as error:
                return (
                    f"op torch.ops.{namespace}.{name} is registered by module {module}, which does not "
                    f"import here: {type(error).__name__}: {error}"
                )
        if not _has_op(namespace, name):
            where = (
                f"importing {module} does not register it"
                if module is not None
                else "the module or library that registers it is unknown: load it before running"
            )
            return f"op torch.ops.{namespace}.{name} is missing: {where}"
    return None

def _has_op(namespace: str, name: str) -> bool:
    try:
        return hasattr(getattr(torch.ops, namespace), name)
    except Exception:
        return False



BROKEN = register_ops(REQUIRED_OPS)

def build() -> tuple[torch.fx.GraphModule, list[Any]]:
    if BROKEN is not None:
        raise ReproBroken(BROKEN)
    try:
        return with_visible_outputs(_trace(Repro()), VISIBLE_OUTPUTS), make_inputs()
    except Exception as error:
        raise ReproBroken(f"the graph cannot be built: {type(error).__name__}: {error}") from error

def run_check() -> tuple[int, str]:
    torch.manual_seed(0)
    try:
        graph, inputs = build()
    except ReproBroken as error:
        return BROKEN_EXIT, f"REPRO BROKEN: {error}"
    with torch.set_grad_enabled(GRAD_ENABLED):
        verdict = judge_graph(graph, inputs, TOL, CHECK_NON_FLOAT, level=LEVEL)
    if verdict.failure == FailureKind.EAGER_ERROR:
        return (
            BROKEN_EXIT,
            f"REPRO BROKEN: the graph fails eagerly on its own inputs: {verdict.error}",
        )
    lines = [f"expected failure: {KIND}" + (f" ({EXPECTED_ERROR})" if EXPECTED_ERROR else "")]
    if SKIPPED_CONFIG:
        lines.append(
            f"note: Inductor config keys this torch ({torch.__version__}) lacks were skipped: "
            f"{', '.join(SKIPPED_CONFIG)}"
        )
    if verdict.leaves:
        lines.append(shown_table(verdict.leaves))
    if verdict.failure is None:
        lines.append("PASS: the compiled graph matches the reference: the bug is fixed")
        return FIXED_EXIT, "\n".join(lines)
    lines.append(f"{verdict.failure}" + (f": {verdict.error}" if verdict.error else ""))
    if same_failure(verdict, KIND, EXPECTED_ERROR, ERROR_PATTERN):
        lines.append("REPRODUCED")
        return REPRODUCED_EXIT, "\n".join(lines)
    lines.append("FAILS DIFFERENTLY from the recorded failure")
    return FAILS_DIFFERENTLY_EXIT, "\n".join(lines)

def main() -> int:
    status, report = run_check()
    print(report)
    return status

try:
    import pytest
except ImportError:  # the file runs with torch alone
    pytest = None  # type: ignore[assignment]

if pytest is not None:

    @pytest.mark.inductor_repro(kind=KIND, tol=TOL)
    def test_repro() -> None:
        status, report = run_check()
        assert status == FIXED_EXIT, report

if __name__ == "__main__":
    sys.exit(main())



# --- the code Inductor generated for this graph (torch 2.15.0+cu132), to read; the check above compiles afresh ---
# // cpp_fused_0
# #include <torch/csrc/inductor/cpp_prefix.h>
# extern "C"  void  kernel(const double* in_ptr0,
#                        double* out_ptr0,
#                        int64_t* out_ptr1)
# {
#     std::atomic<int> inductor_cpu_integer_div_error{0};
#     inductor_cpu_integer_div_error_flag = &inductor_cpu_integer_div_error;
#     {
#         #pragma GCC ivdep
#         for(int64_t x0=static_cast<int64_t>(0L); x0<static_cast<int64_t>(2L); x0+=static_cast<int64_t>(1L))
#         {
#             {
#                 {
#                     auto tmp0 = static_cast<int64_t>(0);
#                     auto tmp1 = static_cast<int64_t>(1);
#                     auto tmp2 = tmp0 < tmp1;
#                     auto tmp3 = c10::div_floor_integer(static_cast<int64_t>(3L*x0), static_cast<int64_t>(2L));
#                     auto tmp4 = c10::convert<int64_t>(tmp3);
#                     auto tmp5 = 2L + (c10::div_floor_integer(static_cast<int64_t>(3L*x0), static_cast<int64_t>(2L)));
#                     auto tmp6 = c10::convert<int64_t>(tmp5);
#                     auto tmp7 = tmp4 < tmp6;
#                     auto tmp8 = tmp2 & tmp7;
#                     auto tmp9 = [&]
#                     {
#                         auto tmp10 = in_ptr0[static_cast<int64_t>(c10::div_floor_integer(static_cast<int64_t>(3L*x0), static_cast<int64_t>(2L)))];
#                         return tmp10;
#                     }
#                     ;
#                     auto tmp11 = tmp8 ? tmp9() : -std::numeric_limits<decltype(tmp9())>::infinity();
#                     auto tmp12 = 1L + (c10::div_floor_integer(static_cast<int64_t>(3L*x0), static_cast<int64_t>(2L)));
#                     auto tmp13 = c10::convert<int64_t>(tmp12);
#                     auto tmp14 = tmp13 < tmp6;
#                     auto tmp15 = tmp2 & tmp14;
#                     auto tmp16 = [&]
#                     {
#                         auto tmp17 = in_ptr0[static_cast<int64_t>(1L + (c10::div_floor_integer(static_cast<int64_t>(3L*x0), static_cast<int64_t>(2L))))];
#                         return tmp17;
#                     }
#                     ;
#                     auto tmp18 = tmp15 ? tmp16() : -std::numeric_limits<decltype(tmp16())>::infinity();
#                     auto tmp19 = max_propagate_nan(tmp18, tmp11);
#                     auto tmp20 = [&]
#                     {
#                         auto tmp21 = in_ptr0[static_cast<int64_t>(c10::div_floor_integer(static_cast<int64_t>(3L*x0), static_cast<int64_t>(2L)))];
#                         return tmp21;
#                     }
#                     ;
#                     auto tmp22 = tmp8 ? tmp20() : -std::numeric_limits<decltype(tmp20())>::infinity();
#                     auto tmp23 = [&]
#                     {
#                         auto tmp24 = in_ptr0[static_cast<int64_t>(1L + (c10::div_floor_integer(static_cast<int64_t>(3L*x0), static_cast<int64_t>(2L))))];
#                         return tmp24;
#                     }
#                     ;
#                     auto tmp25 = tmp15 ? tmp23() : -std::numeric_limits<decltype(tmp23())>::infinity();
#                     auto tmp26 = tmp25 > tmp22;
#                     auto tmp27 = tmp26 ? tmp13 : tmp4;
#                     auto tmp28 = max_propagate_nan(tmp25, tmp22);
#                     out_ptr0[static_cast<int64_t>(x0)] = tmp19;
#                     out_ptr1[static_cast<int64_t>(x0)] = tmp27;
#                 }
#             }
#         }
#     }
#     inductor_cpu_integer_div_error_flag = nullptr;
#     inductor_cpu_throw_if_integer_div_error(inductor_cpu_integer_div_error);
# }