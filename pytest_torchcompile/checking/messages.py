"""The messages a test fails with where its check finds the compiler at fault: the verdict, the
table of outputs, the failing graph and the repro with the line that reruns it."""

from __future__ import annotations

import os
import shlex

from pytest_torchcompile.checking.outcome import CheckOutcome, GraphOutcome
from pytest_torchcompile.common.leaves import shown_table
from pytest_torchcompile.common.results import CaseResult
from pytest_torchcompile.reporting.layout import TerminalLayout


def relative(path: str) -> str:
    try:
        return os.path.relpath(path)
    except ValueError:
        return path


def failure_message(result: CaseResult, outcome: CheckOutcome, layout: TerminalLayout) -> str:
    lines = [f"compile accuracy: {result.status}: {result.message}"]
    if outcome.comparison is not None and outcome.comparison.leaves:
        lines.append(f"reference: {outcome.reference}")
        lines.append(shown_table(outcome.comparison.leaves, layout.width))
    if result.graph:
        lines.append(f"failing graph: {result.graph}")
    lines += _repro_lines(result)
    if (
        not result.repro_path
        and result.repro_unwritten is None
        and result.status.is_compiler_failure
    ):
        lines.append(
            "no repro: no graph reached Inductor"
            if not outcome.graphs
            else "no repro: the failing graph could not be identified"
        )
    return layout.fit(layout.public("\n".join(lines)))


def graph_failures_message(
    results: list[CaseResult], failures: list[GraphOutcome], layout: TerminalLayout
) -> str:
    lines = [f"compile accuracy: {len(failures)} graph(s) compiled by this test fail"]
    for result, failure in zip(results, failures, strict=True):
        lines.append(f"{result.status}: {failure.message}")
        if failure.leaves:
            lines.append(shown_table(failure.leaves, layout.width))
        lines += _repro_lines(result)
    return layout.fit(layout.public("\n".join(lines)))


def _repro_lines(result: CaseResult) -> list[str]:
    if result.repro_unwritten is not None:
        return [f"repro not written: {result.repro_unwritten}"]
    if not result.repro_path:
        return []
    if result.repro_defect is not None:
        return [
            f"repro: {result.repro_path}",
            f"the repro is broken, a defect of pytest-torchcompile (please report it): {result.repro_defect}",
        ]
    # Quoted for the shell it is pasted into: a repro directory may hold spaces or a ``$``.
    return [
        f"repro: {result.repro_path}",
        f"rerun: python {shlex.quote(relative(result.repro_path))}",
    ]
