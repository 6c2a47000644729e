"""What a repro judges, on its own: the fp64 accuracy rule for one output tensor, and the
identity of a compile or runtime failure.

A compiled result is judged against an fp64 reference *relative to eager's own error*, as
PyTorch's ``torch._dynamo.utils.same`` does. This module needs torch, math and re only: repro
files embed it whole (its docstrings left out), so they judge exactly as the plugin does.
"""

from __future__ import annotations

import math
import re

import torch

from pytest_torchcompile.common.leaves import LeafRule


# fmt: off
# Embedded in compact repro files (repros/compact.py), which stay within the line count of
# torch's own minified repro: kept as written.
# For a float8 format, the dtype its values are judged in, which holds each of them exactly:
# float16 (a longer mantissa and a wider exponent range than e4m3 and e5m2 have), float32 for
# e8m0's powers of two; None for any other dtype.
def wider_than_float8(dtype: torch.dtype) -> torch.dtype | None: return (torch.float16 if torch.finfo(dtype).max <= torch.finfo(torch.float16).max else torch.float32) if str(dtype).startswith("torch.float8_") else None


# ``value`` as the rule and torch's comparisons take it: a float8 tensor (which has no kernels for
# ``allclose``, ``equal`` and most arithmetic) widened to a dtype that holds each of its values
# exactly, a complex one viewed as its real and imaginary parts, a conjugate or negative view
# resolved first (it has no real view).
def comparable(value: torch.Tensor) -> torch.Tensor: return value.to(wider) if (wider := wider_than_float8(value.dtype)) is not None else torch.view_as_real(value.resolve_conj().resolve_neg()) if value.is_complex() else value.resolve_neg()


# The rules it names are LeafRule's values, spelled out: a compact file embeds this function
# without common/leaves.py (a LeafRule equals its string; tests/unit/judging holds them equal).
def leaf_verdict(compiled: torch.Tensor, eager: torch.Tensor, reference: torch.Tensor | None, tol: float,
                 check_non_float: bool = True) -> tuple[bool, str, tuple[float, ...]]:
    """Whether ``compiled`` passes, by which part of the rule, and the figures it weighed.

    The tensors share a device, shape and dtype, and are judged as :func:`comparable` gives them
    (a float8 one widened, a complex one viewed as real). ``reference`` is the fp64 run's value,
    or None for the weaker same-precision check (cosine against eager). Compiled may be as far
    from fp64 as eager is times ``same()``'s multiplier: 3 for low precision and small tensors,
    whose error rounding noise dominates, else 2.
    """
    compiled, eager, reference = comparable(compiled), comparable(eager), None if reference is None else comparable(reference)
    if not compiled.is_floating_point():  # compiled's value may be eager's or fp64's (eager rounded a float it compared); one computed from floats (a mask, an argmax) flips where rounding crosses a tie: it may be unlike fp64's in up to 3x (same()'s larger multiplier) as many elements as eager's
        return (True, "not checked (non-floating)", ()) if not check_non_float else (exact, "exact", ()) if (exact := bool(((compiled == eager) | (compiled == (eager if reference is None else reference.to(compiled.dtype)))).all())) or reference is None else ((wrong := [float((value != reference.to(compiled.dtype)).sum()) for value in (compiled, eager)])[0] <= 3.0 * wrong[1], "exact", (*wrong, 3.0))
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
    """Whether the fp64 run computed this output as eager did: an op may fix an output's precision
    (a quantized op's ``output_dtype=torch.float32``), and the fp64 run then gives eager's values
    in eager's dtype. Eager's error, zero, is then no sample of rounding, and the output is judged
    by the same-precision check, as without a reference. (An fp64 reference equal to eager, a
    copy's or a gather's, is a real sample, and keeps the fp64 rule.)"""
    return (
        reference is not None
        and reference.dtype == eager.dtype != torch.float64
        and torch.equal(reference, eager)
    )


def within_noise(figures: tuple[float, ...], noise: float, tol: float) -> bool:
    """Whether a compiled result that :func:`leaf_verdict` failed by ``fp64 rmse`` (``figures``)
    passes measured against ``noise``, the rmse against fp64 of a second legitimate evaluation
    (:mod:`reordering`), where that is larger than eager's: eager's error is one sample of the
    rounding a result may carry, and the larger one is the floor."""
    compiled_error, eager_error, multiplier = figures
    return compiled_error <= multiplier * max(eager_error, noise) + tol / 10.0


RESOLUTION_EPSILONS = 2.0
"""How far from fp64 a result in a low-precision format (float16, bfloat16, float8) may be, in
its format's epsilon times the rms of the fp64 value, whatever eager's error: the format's
resolution (see :func:`within_resolution`)."""


def within_resolution(
    compiled: torch.Tensor,
    reference: torch.Tensor,
    compiled_error: float,
    result_dtype: torch.dtype | None = None,
) -> float | None:
    """For a float16, bfloat16 or float8 result that the rule failed: its rmse against fp64 in
    units of the format's epsilon times the rms of the fp64 value, where that is at most
    :data:`RESOLUTION_EPSILONS`; else None. ``result_dtype``: the result's format where
    ``compiled`` holds it widened (a float8 result, judged in float16). Rounding a result to the
    format alone leaves up to 0.3 of these units; a network's roundings in it accumulate to one
    or two, in eager and compiled code alike (Inductor keeps a fused kernel's intermediates in
    fp32 where eager rounds each op, which moves the result by as much), and no rule on the
    result can tell a deviation below that from rounding. Eager's own error is then no bound:
    it is one sample of that rounding, and may be a lucky one."""
    dtype = compiled.dtype if result_dtype is None else result_dtype
    if dtype not in (torch.float16, torch.bfloat16) and wider_than_float8(dtype) is None:
        return None
    finite = compiled.isfinite() & reference.isfinite()
    scale = (
        float(torch.sqrt(torch.mean(torch.square(reference[finite].double()))))
        if bool(finite.any())
        else 0.0
    )
    if scale == 0.0:
        return None
    units = compiled_error / (torch.finfo(dtype).eps * scale)
    return units if units <= RESOLUTION_EPSILONS else None


def inconclusive_reason(
    compiled: torch.Tensor,
    eager: torch.Tensor,
    reference: torch.Tensor | None,
    how: str,
    tol: float,
) -> str | None:
    """Why an output that :func:`leaf_verdict` failed by its non-finite pattern (``how``) cannot
    be judged in its dtype, or None: non-finite values that differ only by an overflow at the
    edge of the dtype's range, or only where eager itself overflowed (non-finite where fp64 is
    finite), the rest within the rule.

    The compact form of a minified repro judges by :func:`leaf_verdict` alone: its graph failed
    this fuller rule, and stays failed without it."""
    if reference is None or how != LeafRule.NON_FINITE:
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
    """How many of eager's values are non-finite where fp64 is finite, where compiled differs in
    its non-finite values from eager's only there (an overflow in an intermediate spreads as
    infinities and NaNs that rounding alone places) or where eager's finite value is at least half
    the dtype's largest, and the values finite in all three pass the rule; else 0. A non-finite
    compiled value where eager is finite and in range, or an infinity of the other sign, is never
    such an overflow."""
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
    """Where compiled and eager differ in being NaN, +inf or -inf."""
    patterns = [torch.stack([t.isnan(), t == math.inf, t == -math.inf]) for t in (compiled, eager)]
    return (patterns[0] != patterns[1]).any(dim=0)


def _overflow_at_range_edge(
    compiled: torch.Tensor, eager: torch.Tensor, reference: torch.Tensor
) -> bool:
    """Whether compiled and eager differ in non-finite values only where one of them overflowed
    at the edge of the dtype's range: one result finite, the other an infinity of its sign, where
    the finite one or the fp64 value is at least half the largest finite value (fp64 an infinity
    of that sign, or NaN, included). Rounding alone decides which side of the edge such a result
    falls on; a NaN against a number, or infinities of two signs, are no overflow."""
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
    """``Type: first line of the message`` (its first ``max_chars``); the identity of a compile
    or runtime failure. A message that carries the traceback of an error raised in another
    process (Inductor's compile workers) stands for that error, named by its traceback's
    exception line: one compile failure then has one identity, whether a worker compiled the
    kernel or this process did (the workers' pool is not always up). A traceback names a class
    with its module (``torch._inductor.exc.CppCompileError``), this process by its name alone."""
    lines = str(error).strip().splitlines()
    headers = [index for index, line in enumerate(lines) if line.startswith("Traceback (most recent call last):")]
    if headers:
        raised = [line for line in lines[headers[-1] + 1:] if line and not line[0].isspace()]
        if raised:
            unqualified = re.sub(r"^(?:\w+\.)+(?=\w+(?::|$))", "", raised[0])
            return f"{type(error).__name__}: {unqualified[:max_chars]}"
    return f"{type(error).__name__}: {lines[0][:max_chars] if lines else ''}"


def normalized_error(signature: str) -> str:
    """A signature without what changes between two compiles of one failure: file paths (Inductor
    names generated modules by content hash), addresses and numbers."""
    without_paths = re.sub(r"(?:[A-Za-z]:)?(?:[/\\][^\s/\\'\"]+)+", "PATH", signature)
    return re.sub(r"0x[0-9a-fA-F]+|\d+", "N", without_paths)
# fmt: on
