"""One output tensor of a compiled run against eager's and the fp64 reference, by :mod:`rule`, with
what a reader of the verdict needs (the worst element); and the elements that memory no op wrote
leaves undecided.

Imports the standard library, torch and other modules of a repro's runtime only: every full repro
file embeds this module whole, so that it judges exactly as the plugin does.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from pytest_torchcompile.common.leaves import LeafResult, LeafRule
from pytest_torchcompile.judging.rule import (
    RESOLUTION_EPSILONS,
    comparable,
    inconclusive_reason,
    leaf_verdict,
    non_finite_differs,
    precision_kept,
    wider_than_float8,
    within_noise,
    within_resolution,
)


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
    """How many values differ in being NaN or an infinity, and the first of them, after "; ": a
    count alone hides a NaN put where eager has an infinity. Empty where none differs."""
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
    """Judge one compiled tensor by :func:`rule.leaf_verdict`, with what a reader of the verdict
    needs beside it. ``reference`` is the fp64 run's value, or None for the weaker same-precision
    (cosine) check used when the model cannot run in fp64. ``noise``: the rmse against fp64 of a
    second legitimate evaluation (:mod:`reordering`), which a failing result is measured against
    too; ``noise_from`` says which, for the leaf's detail (None: the batch reversed, or
    channels-last inputs)."""
    shape = tuple(eager.shape)
    dtype = str(eager.dtype).replace("torch.", "")
    compiled, eager, reference = _on_judging_device(compiled, eager, reference)
    if tuple(compiled.shape) != shape or compiled.dtype != eager.dtype:
        gave = (
            f"compiled gave {tuple(compiled.shape)} {compiled.dtype}, eager {shape} {eager.dtype}"
        )
        if tuple(compiled.shape) != shape:
            return LeafResult(path, shape, dtype, False, LeafRule.METADATA, detail=gave)
        return _wrong_dtype(path, dtype, gave, compiled, eager, reference, tol)
    return _compare_alike(path, compiled, eager, reference, tol, check_non_float, noise, noise_from)


def _on_judging_device(
    compiled: torch.Tensor, eager: torch.Tensor, reference: torch.Tensor | None
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """The three results, detached, where they are judged: where the compiled tensor is (a probe
    returns hundreds of activations, and copying them to the host to judge them there cost a
    CNN's probe seconds); on the host for a device without float64 (MPS)."""
    judged_on = compiled.device if compiled.device.type in ("cpu", "cuda") else torch.device("cpu")
    return (
        compiled.detach().to(judged_on),
        eager.detach().to(judged_on),
        reference.detach().to(judged_on) if reference is not None else None,
    )


def _compare_alike(
    path: str,
    compiled: torch.Tensor,
    eager: torch.Tensor,
    reference: torch.Tensor | None,
    tol: float,
    check_non_float: bool,
    noise: float | None,
    noise_from: str | None,
) -> LeafResult:
    """:func:`compare_tensor` of a compiled result of eager's shape and dtype."""
    shape = tuple(eager.shape)
    dtype = str(eager.dtype).replace("torch.", "")
    # Judged as the format's values, in a dtype that holds them and has the kernels the rule
    # needs; the format's resolution stays its own.
    result_dtype = eager.dtype
    compiled, eager = comparable(compiled), comparable(eager)
    reference = comparable(reference) if reference is not None else None
    kept = precision_kept(eager, reference)
    reference = None if kept else reference
    passed, how, figures = leaf_verdict(compiled, eager, reference, tol, check_non_float)
    rule = LeafRule.COSINE_KEPT if kept and how == LeafRule.COSINE else LeafRule(how)
    if rule in (LeafRule.NOT_CHECKED, LeafRule.EMPTY, LeafRule.ALLCLOSE):
        return LeafResult(path, shape, dtype, passed, rule)
    if rule is LeafRule.EXACT:
        return _exact_result(path, shape, dtype, compiled, eager, passed, figures)
    if rule is LeafRule.NON_FINITE:
        return _non_finite_result(path, shape, dtype, compiled, eager, reference, tol)
    if reference is None:
        worst, where = _worst_element(compiled, eager)
        detail = f"cosine similarity {figures[0]:.5f}"
        return LeafResult(path, shape, dtype, passed, rule, None, None, None, worst, where, detail)
    return _fp64_result(
        path,
        shape,
        dtype,
        compiled,
        eager,
        reference,
        tol,
        passed,
        figures,
        result_dtype,
        noise,
        noise_from,
    )


def _exact_result(
    path: str,
    shape: tuple[int, ...],
    dtype: str,
    compiled: torch.Tensor,
    eager: torch.Tensor,
    passed: bool,
    figures: tuple[float, ...],
) -> LeafResult:
    """An integer or bool result, judged by the rule :attr:`LeafRule.EXACT`."""
    worst, where = _worst_element(compiled, eager)
    detail = _exact_detail(int((compiled != eager).sum()), eager.numel(), passed, figures)
    return LeafResult(
        path,
        shape,
        dtype,
        passed,
        LeafRule.EXACT,
        max_abs_error=worst,
        max_error_index=where,
        detail=detail,
    )


def _non_finite_result(
    path: str,
    shape: tuple[int, ...],
    dtype: str,
    compiled: torch.Tensor,
    eager: torch.Tensor,
    reference: torch.Tensor | None,
    tol: float,
) -> LeafResult:
    """A result whose NaNs and infinities differ from eager's not as fp64's do: it fails, unless
    no result in its dtype could be judged (:func:`rule.inconclusive_reason`)."""
    worst, where = _worst_element(compiled, eager)
    reason = inconclusive_reason(compiled, eager, reference, LeafRule.NON_FINITE, tol)
    return LeafResult(
        path,
        shape,
        dtype,
        reason is not None,
        LeafRule.NON_FINITE if reason is None else LeafRule.INCONCLUSIVE,
        max_abs_error=worst,
        max_error_index=where,
        detail=(
            f"{'' if reason is None else reason + '; '}compiled has "
            f"{int((~torch.isfinite(compiled)).sum())} non-finite values, eager {int((~torch.isfinite(eager)).sum())}"
            f"{_first_non_finite_difference(compiled, eager, reference)}"
        ),
    )


def _fp64_result(
    path: str,
    shape: tuple[int, ...],
    dtype: str,
    compiled: torch.Tensor,
    eager: torch.Tensor,
    reference: torch.Tensor,
    tol: float,
    passed: bool,
    figures: tuple[float, ...],
    result_dtype: torch.dtype,
    noise: float | None,
    noise_from: str | None,
) -> LeafResult:
    """A floating result judged by the fp64 rule (``figures``: its two errors and multiplier),
    then, where it fails, against another legitimate evaluation's error (``noise``) and its
    dtype's resolution."""
    compiled_error, eager_error, multiplier = figures
    # Compiled code's NaNs and infinities that differ from eager's and reach this rule are fp64's.
    as_fp64 = int(non_finite_differs(compiled, eager).sum())
    notes = [f"{as_fp64} non-finite values differ from eager's as fp64's do"] if as_fp64 else []
    if not passed and noise is not None and noise > eager_error:
        passed = within_noise(figures, noise, tol)
        notes.append(_noise_note(noise, eager_error, noise_from))
    units = None if passed else within_resolution(compiled, reference, compiled_error, result_dtype)
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
        LeafRule.FP64,
        rmse_compiled=compiled_error,
        rmse_eager=eager_error,
        multiplier=multiplier,
        max_abs_error=worst,
        max_error_index=where,
        detail="; ".join(notes),
    )


def _noise_note(noise: float, eager_error: float, noise_from: str | None) -> str:
    """What a failing result was measured against besides eager (:func:`compare_tensor`)."""
    evaluation = "the batch reversed, or channels-last inputs" if noise_from is None else noise_from
    times = noise / eager_error if eager_error > 0 else math.inf
    return (
        f"measured against another valid eager evaluation's rmse {noise:.3e} ({evaluation}), "
        + (
            f"{times:.{0 if times >= 10 else 2}f}x eager's"
            if math.isfinite(times)
            else "where eager's is 0"
        )
    )


def _exact_detail(mismatched: int, elements: int, passed: bool, figures: tuple[float, ...]) -> str:
    """What an integer or bool result's exact comparison found: ``figures``, where some element is
    neither eager's nor fp64's, are how many elements compiled code and eager give unlike fp64's,
    and the multiplier between them (:func:`rule.leaf_verdict`)."""
    if not mismatched:
        return ""
    differ = f"{mismatched} of {elements} elements differ"
    if not figures:
        return f"{differ} from eager's as fp64's do" if passed else differ
    compiled, eager, multiplier = figures
    return (
        f"{differ} from eager's; from fp64's, compiled's differ in {compiled:.0f} and eager's in {eager:.0f} "
        f"(at most {multiplier:g}x as many: a value computed from floats flips where rounding "
        "crosses a tie)"
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
    """A result of the right shape in another dtype fails, and its values are judged too, so that
    the table shows them (a wrong dtype often comes with wrong values: an int8 wrap-around lost in
    int64). They are judged in the expected dtype where the compiled values fit it (a cast that
    changes none), else in a dtype that holds both,
    where values out of the expected range differ as they are (torch promotes no float8 dtype:
    its wider dtype, :func:`rule.wider_than_float8`, stands for it)."""
    common = _dtype_holding_both(compiled, eager)
    if reference is not None and common.is_complex and not reference.is_complex():
        reference = reference.to(torch.promote_types(reference.dtype, common))
    values = compare_tensor(
        path, compiled.to(common), eager.to(common), reference, tol, check_non_float=True
    )
    verdict = "match" if values.passed else f"differ ({values.detail or values.rule})"
    return LeafResult(
        path,
        values.shape,
        dtype,
        False,
        LeafRule.METADATA,
        rmse_compiled=values.rmse_compiled,
        rmse_eager=values.rmse_eager,
        multiplier=values.multiplier,
        max_abs_error=values.max_abs_error,
        max_error_index=values.max_error_index,
        detail=f"{gave}; as {str(common).replace('torch.', '')} the values {verdict}",
    )


def _dtype_holding_both(compiled: torch.Tensor, eager: torch.Tensor) -> torch.dtype:
    """The dtype a result of the wrong dtype is judged in (:func:`_wrong_dtype`)."""
    fits = (compiled.is_floating_point() and eager.is_floating_point()) or _cast_keeps(
        compiled, eager.dtype
    )
    if fits:
        return eager.dtype
    return torch.promote_types(
        *(wider_than_float8(value.dtype) or value.dtype for value in (compiled, eager))
    )


def _cast_keeps(value: torch.Tensor, dtype: torch.dtype) -> bool:
    """Whether a cast to ``dtype`` and back changes none of ``value``'s values (a complex value
    never fits a real dtype: the cast drops its imaginary part)."""
    if value.is_complex() and not dtype.is_complex:
        return False
    cast = value.to(dtype)
    back = (cast.real if cast.is_complex() and not value.is_complex() else cast).to(value.dtype)
    return bool((comparable(back) == comparable(value)).all())


def differing_elements(first: Any, second: Any) -> torch.Tensor | None:
    """Where two runs that filled something not a value unlike differ (memory no op wrote:
    ``references.unwritten_elements``; a gradient at a NaN: ``references.nan_dependent_gradients``):
    the elements that depend on it; None where none does."""
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
    """``value`` with the elements ``unwritten`` marks set to zero, so that they judge alike."""
    if unwritten is None or not isinstance(value, torch.Tensor) or value.shape != unwritten.shape:
        return value
    return value.detach().masked_fill(unwritten.to(value.device), 0)
