"""The fp64 accuracy rule and the verdict it gives.

A compiled result is judged against an fp64 reference *relative to eager's own error* in the
original dtype, as PyTorch's ``torch._dynamo.utils.same`` does: compiled may be as far from fp64 as
eager is, times a dtype-dependent multiplier. A fixed allclose would cry wolf on low precision and
miss real deviations on large values.

The functions listed in ``STANDALONE_SOURCES`` depend on torch, ``math`` and ``dataclasses`` only:
generated repro files embed their source, so a repro judges exactly as the plugin does.
"""

from __future__ import annotations

import dataclasses
import enum
import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import torch


class Status(enum.StrEnum):
    PASS = "pass"
    FAIL_ACCURACY = "fail_accuracy"
    FAIL_COMPILE = "fail_compile"
    FAIL_RUNTIME = "fail_runtime"
    EAGER_FAIL = "eager_fail"
    EAGER_NONDETERMINISTIC = "eager_nondeterministic"
    NO_FP64_REFERENCE = "no_fp64_reference"

    @property
    def is_compiler_failure(self) -> bool:
        return self in (Status.FAIL_ACCURACY, Status.FAIL_COMPILE, Status.FAIL_RUNTIME)


DEFAULT_TOLERANCE = 1e-4
TRAINING_TOLERANCE = 1e-3
"""For checks of a training step: gradients sum over the batch, and the error that compiled
forward code's (correct) rounding leaves in saved activations grows through the backward, as
PyTorch's own training accuracy runs allow for (tolerance 1e-3 and up)."""


@dataclass(frozen=True)
class LeafResult:
    """How one output leaf of the compiled run compares with eager and the reference."""

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
        """rmse(compiled, fp64) / rmse(eager, fp64); inf when eager is exact and compiled is not."""
        if self.rmse_compiled is None or self.rmse_eager is None:
            return None
        if self.rmse_eager == 0.0:
            return 0.0 if self.rmse_compiled == 0.0 else math.inf
        return self.rmse_compiled / self.rmse_eager


def rmse(reference: torch.Tensor, result: torch.Tensor) -> float:
    return float(torch.sqrt(torch.mean(torch.square(reference.double() - result.double()))))


def rmse_multiplier(dtype: torch.dtype, numel: int, shape: tuple[int, ...], tol: float) -> float:
    """PyTorch's allowance for compiled error over eager error (``same()``'s multiplier).

    Low precision and small tensors get more room: rounding noise dominates their RMSE.
    """
    if dtype in (torch.float16, torch.bfloat16):
        return 3.0
    if numel < 1000 or (len(shape) == 4 and shape[-1] == shape[-2] == 1) or tol >= 2e-2:
        return 3.0
    return 2.0


def _worst_element(
    result: torch.Tensor, reference: torch.Tensor
) -> tuple[float | None, tuple[int, ...] | None]:
    if result.numel() == 0:
        return None, None
    error = (result.double() - reference.double()).abs()
    error = torch.where(torch.isnan(error), torch.full_like(error, math.inf), error)
    flat_index = int(torch.argmax(error.reshape(-1)))
    index = tuple(int(i) for i in torch.unravel_index(torch.tensor(flat_index), result.shape))
    return float(error.reshape(-1)[flat_index]), index


def _nonfinite_pattern(tensor: torch.Tensor) -> torch.Tensor:
    return torch.stack([torch.isnan(tensor), tensor == math.inf, tensor == -math.inf])


def compare_tensor(
    path: str,
    compiled: torch.Tensor,
    eager: torch.Tensor,
    reference: torch.Tensor | None,
    tol: float,
    check_non_float: bool = True,
) -> LeafResult:
    """Judge one compiled tensor. ``reference`` is the fp64 run's value, or None for the weaker
    same-precision (cosine) check used when the model cannot run in fp64."""
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
        return LeafResult(
            path, shape, dtype, False, "metadata",
            detail=f"compiled gave {tuple(compiled.shape)} {compiled.dtype}, eager {shape} {eager.dtype}",
        )
    if compiled.is_complex():
        compiled, eager = torch.view_as_real(compiled), torch.view_as_real(eager)
        reference = torch.view_as_real(reference) if reference is not None else None
    if not compiled.is_floating_point():
        if not check_non_float:
            return LeafResult(path, shape, dtype, True, "not checked (non-floating)")
        mismatched = int((compiled != eager).sum())
        worst, where = _worst_element(compiled, eager)
        return LeafResult(
            path, shape, dtype, mismatched == 0, "exact",
            max_abs_error=worst, max_error_index=where,
            detail=f"{mismatched} of {eager.numel()} elements differ" if mismatched else "",
        )
    if compiled.numel() == 0:
        return LeafResult(path, shape, dtype, True, "empty")

    compiled_finite = torch.isfinite(compiled)
    eager_finite = torch.isfinite(eager)
    pattern_differs = not torch.equal(_nonfinite_pattern(compiled), _nonfinite_pattern(eager))
    if pattern_differs:
        compiled_better = (
            reference is not None
            and bool(compiled_finite.all())
            and bool(torch.isfinite(reference).all())
            and bool(torch.allclose(reference.to(compiled.dtype), compiled, atol=4e-2, rtol=4e-2))
        )
        if not compiled_better:
            worst, where = _worst_element(compiled, eager)
            return LeafResult(
                path, shape, dtype, False, "non-finite pattern",
                max_abs_error=worst, max_error_index=where,
                detail=f"compiled has {int((~compiled_finite).sum())} non-finite values, eager {int((~eager_finite).sum())}",
            )
    if bool(torch.allclose(compiled, eager, atol=tol, rtol=tol, equal_nan=True)):
        return LeafResult(path, shape, dtype, True, "allclose")

    finite = compiled_finite & eager_finite
    if reference is None:
        cosine = float(
            torch.nn.functional.cosine_similarity(
                compiled[finite].double().flatten(), eager[finite].double().flatten(), dim=0, eps=1e-6
            )
        )
        worst, where = _worst_element(compiled, eager)
        return LeafResult(
            path, shape, dtype, cosine >= 0.99, "cosine vs eager (no fp64 reference)",
            max_abs_error=worst, max_error_index=where, detail=f"cosine similarity {cosine:.5f}",
        )
    finite = finite & torch.isfinite(reference)
    compiled_error = rmse(reference[finite], compiled[finite])
    eager_error = rmse(reference[finite], eager[finite])
    multiplier = rmse_multiplier(eager.dtype, eager.numel(), shape, tol)
    passed = compiled_error <= multiplier * eager_error + tol / 10.0
    worst, where = _worst_element(compiled, reference.to(torch.float64))
    return LeafResult(
        path, shape, dtype, passed, "fp64 rmse",
        rmse_compiled=compiled_error, rmse_eager=eager_error, multiplier=multiplier,
        max_abs_error=worst, max_error_index=where,
    )


def format_table(leaves: list[LeafResult]) -> str:
    """The per-output table of a failure message."""
    header = ("output", "shape", "dtype", "rule", "rmse(comp,fp64)", "rmse(eager,fp64)", "ratio", "max|err|", "at")
    rows = [header]
    for leaf in leaves:
        ratio = leaf.ratio
        rows.append((
            leaf.path,
            "x".join(str(s) for s in leaf.shape) or "scalar",
            leaf.dtype,
            leaf.rule + ("" if leaf.passed else " FAIL"),
            "-" if leaf.rmse_compiled is None else f"{leaf.rmse_compiled:.3e}",
            "-" if leaf.rmse_eager is None else f"{leaf.rmse_eager:.3e}",
            "-" if ratio is None else f"{ratio:.1f}",
            "-" if leaf.max_abs_error is None else f"{leaf.max_abs_error:.3e}",
            "-" if leaf.max_error_index is None else str(list(leaf.max_error_index)),
        ))
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    lines = ["  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)) for row in rows]
    details = [f"  {leaf.path}: {leaf.detail}" for leaf in leaves if leaf.detail and not leaf.passed]
    return "\n".join(lines + details)


def summarized_leaves(leaves: list[LeafResult], passing_rows: int = 5) -> tuple[list[LeafResult], int]:
    """The rows worth reading when a graph returns many outputs (every saved activation of a
    training graph): the failing ones and the ``passing_rows`` passing ones with the largest
    ratio, in their order; and how many passing ones were left out."""
    passing = [index for index, leaf in enumerate(leaves) if leaf.passed]
    if len(passing) <= passing_rows:
        return list(leaves), 0

    def closeness(index: int) -> float:
        ratio = leaves[index].ratio
        return ratio if ratio is not None and ratio == ratio else -1.0

    shown = set(sorted(passing, key=closeness, reverse=True)[:passing_rows])
    return [leaf for index, leaf in enumerate(leaves) if not leaf.passed or index in shown], len(passing) - passing_rows


STANDALONE_SOURCES = (
    LeafResult, rmse, rmse_multiplier, _worst_element, _nonfinite_pattern, compare_tensor, format_table,
    summarized_leaves,
)


# --- nested outputs -------------------------------------------------------------------------


PLAIN_VALUES = (int, float, bool, str, complex, type(None), torch.dtype, torch.device)
"""Non-tensor leaves compared by equality; any other object is looked into, or left alone."""

MAX_OBJECT_DEPTH = 6


def flatten_outputs(value: Any, path: str = "out", depth: int = 0) -> Iterator[tuple[str, Any]]:
    """Yield (path, leaf) for any nesting of tuples, lists, dicts, namedtuples, dataclasses and
    ModelOutput-style objects (``OrderedDict`` subclasses), e.g. ``out[1]["logits"]``.

    Other objects (a transformers ``DynamicCache``, say) are looked into through their attributes,
    so the tensors they hold are judged like any output."""
    if isinstance(value, (torch.Tensor, *PLAIN_VALUES)):
        yield path, value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from flatten_outputs(item, f"{path}[{key!r}]", depth + 1)
    elif isinstance(value, tuple) and hasattr(value, "_fields"):
        for key in value._fields:
            yield from flatten_outputs(getattr(value, key), f"{path}.{key}", depth + 1)
    elif isinstance(value, (list, tuple)):
        for index, item in enumerate(value):
            yield from flatten_outputs(item, f"{path}[{index}]", depth + 1)
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        for field in dataclasses.fields(value):
            yield from flatten_outputs(getattr(value, field.name), f"{path}.{field.name}", depth + 1)
    elif (hasattr(value, "__dict__") and depth < MAX_OBJECT_DEPTH
          and not isinstance(value, (type, torch.nn.Module)) and not callable(value)):
        for key, item in vars(value).items():
            if not key.startswith("_"):
                yield from flatten_outputs(item, f"{path}.{key}", depth + 1)
    else:
        yield path, value


@dataclass(frozen=True)
class Comparison:
    leaves: list[LeafResult]
    structure_error: str | None = None

    @property
    def passed(self) -> bool:
        return self.structure_error is None and all(leaf.passed for leaf in self.leaves)

    @property
    def failing(self) -> list[LeafResult]:
        return [leaf for leaf in self.leaves if not leaf.passed]

    @property
    def worst_ratio(self) -> float | None:
        ratios = [leaf.ratio for leaf in self.leaves if leaf.ratio is not None]
        return max(ratios) if ratios else None


def compare_outputs(
    compiled: Any,
    eager: Any,
    reference: Any | None,
    tol: float = DEFAULT_TOLERANCE,
    check_non_float: bool = True,
    root: str = "out",
) -> Comparison:
    """Compare nested outputs leaf by leaf; ``reference`` None selects the weaker check."""
    compiled_leaves = list(flatten_outputs(compiled, root))
    eager_leaves = list(flatten_outputs(eager, root))
    reference_leaves = list(flatten_outputs(reference, root)) if reference is not None else None
    if [p for p, _ in compiled_leaves] != [p for p, _ in eager_leaves] or (
        reference_leaves is not None and [p for p, _ in reference_leaves] != [p for p, _ in eager_leaves]
    ):
        return Comparison([], "output structure differs: compiled "
                          f"{[p for p, _ in compiled_leaves]} vs eager {[p for p, _ in eager_leaves]}")
    leaves: list[LeafResult] = []
    for index, ((path, comp), (_, eag)) in enumerate(zip(compiled_leaves, eager_leaves, strict=True)):
        ref = reference_leaves[index][1] if reference_leaves is not None else None
        if isinstance(eag, torch.Tensor):
            if not isinstance(comp, torch.Tensor):
                leaves.append(LeafResult(path, tuple(eag.shape), str(eag.dtype), False, "metadata",
                                         detail=f"compiled gave {type(comp).__name__}"))
                continue
            leaves.append(compare_tensor(path, comp, eag, ref if isinstance(ref, torch.Tensor) else None,
                                         tol, check_non_float))
        elif isinstance(eag, float) and isinstance(comp, float):
            leaves.append(compare_tensor(path, torch.tensor(comp), torch.tensor(eag),
                                         torch.tensor(ref, dtype=torch.float64) if isinstance(ref, float) else None,
                                         tol, check_non_float))
        elif not isinstance(eag, PLAIN_VALUES):
            leaves.append(LeafResult(path, (), type(eag).__name__, True, "not compared (opaque object)"))
        else:
            same = comp == eag
            leaves.append(LeafResult(path, (), type(eag).__name__, bool(same) or not check_non_float,
                                     "exact", detail="" if same else f"compiled {comp!r} != eager {eag!r}"))
    return Comparison(leaves)


def first_disagreement(first: Any, second: Any, tol: float, root: str = "out") -> str | None:
    """Where two eager runs disagree (allclose at ``tol`` for floats, exact otherwise), or None."""
    first_leaves = list(flatten_outputs(first, root))
    second_leaves = list(flatten_outputs(second, root))
    if [p for p, _ in first_leaves] != [p for p, _ in second_leaves]:
        return f"{root} (its structure)"
    for (path, a), (_, b) in zip(first_leaves, second_leaves, strict=True):
        if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
            if a.shape != b.shape or a.dtype != b.dtype:
                return path
            if a.is_floating_point() or a.is_complex():
                if not torch.allclose(a.detach(), b.detach().to(a.device), atol=tol, rtol=tol, equal_nan=True):
                    return path
            elif not torch.equal(a, b.to(a.device)):
                return path
        elif isinstance(a, PLAIN_VALUES) and a != b:
            return path
    return None
