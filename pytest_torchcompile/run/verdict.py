"""A check's verdict: its status, each output's result, and how a failure reads. Kept free of
torch so that the processes that only gather and report results (an xdist controller, a run
without ``--compile-accuracy``) need not import it."""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass


class Status(enum.StrEnum):
    PASS = "pass"
    FAIL_ACCURACY = "fail_accuracy"
    FAIL_COMPILE = "fail_compile"
    FAIL_RUNTIME = "fail_runtime"
    EAGER_FAIL = "eager_fail"
    EAGER_NONDETERMINISTIC = "eager_nondeterministic"
    OUT_OF_MEMORY = "out_of_memory"
    """A run of the check (eager, fp64 or compiled) ran out of host or device memory: nothing
    could be judged, and nothing says the compiler is at fault."""
    NO_FP64_REFERENCE = "no_fp64_reference"
    UNCONFIRMED = "unconfirmed"
    """The check found a failure that its repro, judged in a fresh process, does not show: not
    failed, reported with the reason."""
    NOT_JUDGED = "not_judged"
    """The check ran, but its results hold no tensor to judge (the model returned None, a string,
    an opaque object): not a failure of the compiler, and no evidence that it is right."""

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


def format_table(leaves: list[LeafResult], width: int | None = None) -> str:
    """The per-output table of a failure message; within ``width`` where it is given, by leaving
    out columns, which a line then names. Self-contained: repro files carry its source."""
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
        lines.append(f"(left out at this width: {', '.join(reversed(left_out))}; in the repro file and "
                     "the JSON report)")
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
    def fails_only_in_non_float(self) -> bool:
        """Some output fails, and each failing one is non-floating (an integer or bool output,
        judged by the rule "exact"): no floating output is wrong."""
        return bool(self.failing) and all(leaf.rule == "exact" for leaf in self.failing)

    @property
    def worst_ratio(self) -> float | None:
        ratios = [leaf.ratio for leaf in self.leaves if leaf.ratio is not None]
        return max(ratios) if ratios else None


_POISONING_ERRORS = ("CUDA error", "illegal memory access", "device-side assert", "AcceleratorError")


def leaves_device_unusable(error_text: str) -> bool:
    """Whether an error is one after which the process's CUDA context is unusable (a child that
    saw one is replaced; a test process that did names the culprit on later failures)."""
    return any(marker in error_text for marker in _POISONING_ERRORS)


_MEMORY_ERRORS = ("can't allocate memory", "out of memory", "Cannot allocate memory")


def out_of_memory(error: BaseException | None) -> bool:
    """Whether ``error``, or an error it was raised from, is memory exhaustion: Python's
    ``MemoryError``, torch's ``OutOfMemoryError`` (a GPU's), or a host allocator's failure
    (``DefaultCPUAllocator: can't allocate memory``)."""
    seen: set[int] = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        if isinstance(error, MemoryError) or type(error).__name__ == "OutOfMemoryError":
            return True
        if any(marker in str(error) for marker in _MEMORY_ERRORS):
            return True
        error = error.__cause__ or error.__context__
    return False
