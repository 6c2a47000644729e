"""A failure message shows a long table as a repro file does: the failing rows and the passing
ones closest to failing, with a count of the rest (a training check judges every gradient)."""

from __future__ import annotations

from typing import Any, cast

import pytest

from pytest_torchcompile.checking.messages import failure_message, graph_failures_message
from pytest_torchcompile.checking.outcome import CheckOutcome, GraphOutcome
from pytest_torchcompile.common.leaves import FULL_TABLE_VARIABLE, LeafResult
from pytest_torchcompile.common.results import CaseResult
from pytest_torchcompile.common.verdict import Comparison, Status
from pytest_torchcompile.reporting.layout import TerminalLayout


def gradients(count: int, failing: set[int]) -> list[LeafResult]:
    return [
        LeafResult(
            f"out.grad[w{index}]",
            (3,),
            "float32",
            index not in failing,
            "fp64 rmse",
            rmse_compiled=1.0 + index / count,
            rmse_eager=1.0,
        )
        for index in range(count)
    ]


def table_rows(message: str) -> list[str]:
    return [line for line in message.splitlines() if line.startswith("out.grad[")]


def training_failure(leaves: list[LeafResult]) -> str:
    result = CaseResult("test_train", Status.FAIL_ACCURACY, "4 of 226 outputs deviate")
    outcome = CheckOutcome(Status.FAIL_ACCURACY, result.message, Comparison(leaves))
    return failure_message(result, outcome, TerminalLayout(80))


def test_a_long_table_shows_the_failing_rows_and_the_closest_with_a_count(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(FULL_TABLE_VARIABLE, raising=False)
    message = training_failure(gradients(226, {3, 50, 100, 200}))
    rows = table_rows(message)
    assert len(rows) == 9
    assert [row.split()[0] for row in rows if "FAIL" in row] == [
        "out.grad[w3]",
        "out.grad[w50]",
        "out.grad[w100]",
        "out.grad[w200]",
    ]
    assert {"out.grad[w225]", "out.grad[w221]"} <= {row.split()[0] for row in rows}
    assert (
        f"(217 more outputs pass; {FULL_TABLE_VARIABLE}=1 shows every row)" in message.splitlines()
    )
    assert all(len(line) <= 80 for line in message.splitlines())


def test_the_full_table_variable_shows_every_row(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(FULL_TABLE_VARIABLE, "1")
    message = training_failure(gradients(226, {3}))
    assert len(table_rows(message)) == 226
    assert "more outputs pass" not in message


def test_a_plain_graphs_long_table_is_summarized_too(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(FULL_TABLE_VARIABLE, raising=False)
    leaves = gradients(40, {7})
    # Only the message and the table are shown: no graph is needed.
    failure = GraphOutcome(
        graph=cast(Any, None),
        inputs=[],
        status=Status.FAIL_ACCURACY,
        message="1 of 40 outputs deviate",
        leaves=leaves,
    )
    result = CaseResult("test_plain", Status.FAIL_ACCURACY, failure.message)
    message = graph_failures_message([result], [failure], TerminalLayout(80))
    assert len(table_rows(message)) == 6
    assert "(34 more outputs pass" in message
