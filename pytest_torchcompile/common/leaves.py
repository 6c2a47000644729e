"""How one output leaf of a compiled run compares, and the table a failure shows of them.

Free of torch, and of any import beyond the standard library: every full repro file embeds this
module whole, and the processes that only report results read it too."""

from __future__ import annotations

import enum
import math
import os
from dataclasses import dataclass

FULL_TABLE_VARIABLE = "PYTEST_TORCHCOMPILE_FULL_TABLE"
"""``1``: a failure's table shows every row (a repro file reads it, and so does the terminal's
failure message); ``0`` or unset: the rows :func:`summarized_leaves` keeps. A run of the plugin
takes no other value; a repro file, which runs without the plugin, reads any other as ``1``."""


class LeafRule(enum.StrEnum):
    """By which part of the rule an output leaf was judged: the table's ``rule`` column, a JSON
    report's ``rule``. ``judging.rule.leaf_verdict`` spells the values out (compact repro files
    embed it without this module); a member equals its string."""

    FP64 = "fp64 rmse"
    """A floating output judged against the fp64 reference relative to eager's own error."""
    ALLCLOSE = "allclose"
    """A floating output close to eager's within the tolerance."""
    EMPTY = "empty"
    EXACT = "exact"
    """An integer or bool output (or a plain value): eager's, fp64's, or within the flips rounding
    makes."""
    NOT_CHECKED = "not checked (non-floating)"
    """An integer or bool output of a check that leaves those unjudged."""
    NON_FINITE = "non-finite pattern"
    """Compiled code's NaNs and infinities differ from eager's, not as fp64's do."""
    COSINE = "cosine vs eager (no fp64 reference)"
    """The same-precision check where no fp64 reference exists."""
    COSINE_KEPT = "cosine vs eager (the fp64 run kept its dtype)"
    """The same-precision check where the fp64 run computed the output in eager's dtype."""
    METADATA = "metadata"
    """A result of another shape, dtype, type or count than eager's."""
    NOT_COMPARED = "not compared (opaque object)"
    INCONCLUSIVE = "inconclusive"
    """An output that the fp64 rule fails but that no result in its dtype can be judged by (an
    overflow at the edge of the dtype's range, or one eager itself made; a discontinuous one): it
    passes, as no evidence of a compiler defect, and its detail says why."""


@dataclass(frozen=True)
class LeafResult:
    """How one output leaf of the compiled run compares with eager and the reference."""

    path: str
    shape: tuple[int, ...]
    dtype: str
    passed: bool
    rule: LeafRule
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
    rows = [header, *(_row(leaf) for leaf in leaves)]
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    shown, left_out = _columns_within(header, widths, width)
    lines = ["  ".join(row[i].ljust(widths[i]) for i in shown).rstrip() for row in rows]
    if left_out:
        lines.append(
            f"(left out at this width: {', '.join(reversed(left_out))}; in the repro file and "
            "the JSON report)"
        )
    return "\n".join(lines + _failure_details(leaves))


def _failure_details(leaves: list[LeafResult]) -> list[str]:
    """The lines under a failure's table: what each failing leaf's detail says."""
    return [f"  {leaf.path}: {leaf.detail}" for leaf in leaves if leaf.detail and not leaf.passed]


def _columns_within(
    header: tuple[str, ...], widths: list[int], width: int | None
) -> tuple[list[int], list[str]]:
    """The columns of :func:`format_table` shown within ``width``, and those left out."""
    shown = list(range(len(header)))
    left_out = []
    # What a narrow terminal goes without, first to last (the repro file and the JSON report
    # keep every column).
    for name in ("at", "max|err|", "rmse(eager,fp64)", "rmse(comp,fp64)", "dtype", "shape"):
        if width is None or sum(widths[i] + 2 for i in shown) - 2 <= width:
            break
        shown.remove(header.index(name))
        left_out.append(name)
    return shown, left_out


def _row(leaf: LeafResult) -> tuple[str, ...]:
    """A leaf's cells in the table of :func:`format_table`: ``-`` where it has no figure."""
    ratio = leaf.ratio
    return (
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


def summarized_leaves(
    leaves: list[LeafResult], passing_rows: int = 5
) -> tuple[list[LeafResult], int]:
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
    return [leaf for index, leaf in enumerate(leaves) if not leaf.passed or index in shown], len(
        passing
    ) - passing_rows


def shown_table(leaves: list[LeafResult], width: int | None = None) -> str:
    """The table of a failure as a reader sees it, in the terminal and in a repro file's output:
    the failing rows and the passing ones closest to failing (:func:`summarized_leaves`), with a
    count of the rest; every row where :data:`FULL_TABLE_VARIABLE` is set."""
    if os.environ.get(FULL_TABLE_VARIABLE, "").strip() not in ("", "0"):
        return format_table(leaves, width)
    shown, left_out = summarized_leaves(leaves)
    table = format_table(shown, width)
    return table + (
        f"\n({left_out} more outputs pass; {FULL_TABLE_VARIABLE}=1 shows every row)"
        if left_out
        else ""
    )
