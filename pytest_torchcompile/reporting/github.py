"""The Markdown section a run appends to ``$GITHUB_STEP_SUMMARY``: failing checks first, so that
they survive its size cap."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path

from pytest_torchcompile.common.results import CaseResult
from pytest_torchcompile.reporting.baseline import Decision, is_failing
from pytest_torchcompile.reporting.cells import (
    baseline_summary,
    format_graphs,
    format_minify,
    format_ratio,
    printable,
    sorted_by_test,
    status_summary,
)
from pytest_torchcompile.reporting.grouping import root_causes


def _markdown_cell(text: str, code: bool = False) -> str:
    text = printable(text.replace("\r", " ").replace("\n", " "), lines=True)
    if code and "`" not in text:
        text = f"`{text}`"
    # GitHub splits table cells on "|" even inside code spans unless it is escaped.
    return text.replace("|", "\\|")


def _summary_priority(result: CaseResult, decisions: Mapping[str, Decision] | None) -> int:
    decision = decisions.get(result.nodeid) if decisions else None
    if decision is not None and decision.fails_run:
        return 0
    return 1 if is_failing(result.status) else 2


def _markdown_row(result: CaseResult, decisions: Mapping[str, Decision] | None) -> str:
    decision = decisions.get(result.nodeid) if decisions else None
    cells = [
        _markdown_cell(result.nodeid, code=True),
        _markdown_cell(result.case_id or "-"),
        _markdown_cell(str(result.status)),
        format_ratio(result.worst_ratio),
        format_graphs([result]),
        _markdown_cell(decision.outcome.label if decision else "-"),
        _markdown_cell(result.repro_path, code=True) if result.repro_path else "-",
        _markdown_cell(result.minify.path, code=True)
        if result.minify and result.minify.path
        else "-",
        _markdown_cell(format_minify(result.minify)),
    ]
    return "| " + " | ".join(cells) + " |\n"


GITHUB_ROOT_CAUSES = 10
"""Root causes the GitHub summary lists (the ones breaking most tests); a count says the rest."""


def _root_causes_markdown(results: Sequence[CaseResult]) -> str:
    """Where each group of failures appears, e.g. ``- deviation appears in Inductor's C++ codegen
    of aten.relu (ops `aten.relu`, accuracy): 2 tests``; nothing when no failure was attributed."""
    groups = root_causes(results)
    if not groups:
        return ""
    lines = [f"\n**Root causes:** {len(groups)}\n"]
    for group in groups[:GITHUB_ROOT_CAUSES]:
        ops = ", ".join(_markdown_cell(op, code=True) for op in group.ops)
        tests = "1 test" if len(group.tests) == 1 else f"{len(group.tests)} tests"
        lines.append(
            f"- {_markdown_cell(group.stage_summary or group.stage)} (ops {ops}, "
            f"{_markdown_cell(group.failure_type)}): {tests}\n"
        )
    if len(groups) > GITHUB_ROOT_CAUSES:
        lines.append(f"- … {len(groups) - GITHUB_ROOT_CAUSES} more\n")
    return "".join(lines)


def _utf8_size(text: str) -> int:
    return len(text.encode("utf-8"))


def github_summary_markdown(
    results: Sequence[CaseResult],
    decisions: Mapping[str, Decision] | None,
    max_bytes: int = 64_000,
) -> str:
    """A Markdown section for ``$GITHUB_STEP_SUMMARY``: counts, then a table with one row per check.

    Rows of tests that fail the run come first, then other failing checks, then the rest, so
    that what matters survives the size cap; rows that do not fit in ``max_bytes`` (UTF-8) are
    replaced by a final "… N more rows" line.
    """
    head = f"### pytest-torchcompile\n\n**Compile accuracy:** {status_summary(results)}\n"
    if decisions is not None:
        head += f"\n**Baseline:** {baseline_summary(decisions)}\n"
    head += _root_causes_markdown(results)
    head += (
        "\n| test | case | status | worst ratio | graphs | baseline | repro | minified | minify |\n"
        "|---|---|---|---|---|---|---|---|---|\n"
    )
    ordered = sorted(
        sorted_by_test(results), key=lambda result: _summary_priority(result, decisions)
    )
    rows = [_markdown_row(result, decisions) for result in ordered]
    full = head + "".join(rows)
    if _utf8_size(full) <= max_bytes:
        return full

    def footer(left_out: int) -> str:
        # The blank line ends the table: GitHub would read a following text line as another row.
        return f"\n… {left_out} more rows\n"

    budget = max_bytes - _utf8_size(head) - _utf8_size(footer(len(rows)))
    if budget < 0:
        raise ValueError(f"max_bytes={max_bytes} cannot hold even the summary's header")
    kept: list[str] = []
    for row in rows:
        budget -= _utf8_size(row)
        if budget < 0:
            break
        kept.append(row)
    return head + "".join(kept) + footer(len(rows) - len(kept))


def append_github_summary(
    path: str | os.PathLike[str],
    results: Sequence[CaseResult],
    decisions: Mapping[str, Decision] | None,
    max_bytes: int = 64_000,
) -> None:
    """Append :func:`github_summary_markdown` to ``path`` (the file ``$GITHUB_STEP_SUMMARY`` names;
    other steps' sections in it are kept)."""
    with Path(path).open("a", encoding="utf-8") as handle:
        handle.write(github_summary_markdown(results, decisions, max_bytes))
