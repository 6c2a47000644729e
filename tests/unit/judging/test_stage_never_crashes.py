"""The stage step never crashes: compiled code that returns more results than eager's graph
lists is a failure judged like any other, and an attribution that raises is an unknown stage
with the reason."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pytest
import torch
import torch.fx
from torch.fx.experimental.proxy_tensor import make_fx

from pytest_torchcompile.common.kinds import FailureKind
from pytest_torchcompile.judging import stages
from pytest_torchcompile.judging.isolation import tasks
from pytest_torchcompile.judging.isolation.protocol import JudgeSettings, StageQuery
from pytest_torchcompile.judging.judge import POST_AOT, judge_graph


def doubled(x: torch.Tensor) -> tuple[torch.Tensor]:
    return (x * 2,)


def with_an_extra_result(gm: torch.fx.GraphModule, inputs: Sequence[Any]) -> Callable[..., Any]:
    """Compiled code of an op with more results than its graph node lists."""
    return lambda *args: (*gm(*args), args[0] + 1)


def test_more_compiled_results_than_eager_fail_on_their_count() -> None:
    x = torch.randn(8)
    verdict = judge_graph(make_fx(doubled)(x), [x], 1e-4, False, compiler=with_an_extra_result)
    assert verdict.failure == FailureKind.ACCURACY
    assert [leaf.rule for leaf in verdict.leaves] == ["metadata"]
    assert verdict.leaves[0].detail == "compiled returned 2 results, eager 1"


def test_a_stage_step_whose_compile_returns_more_results_does_not_raise() -> None:
    x = torch.randn(8)
    tried = stages._Stages(
        make_fx(doubled)(x), [x], 1e-4, stages.ExpectedFailure(), False, POST_AOT
    )
    assert tried.fails("inductor", with_an_extra_result)
    assert tried.trail == ["inductor: fails"]


def test_an_attribution_that_raises_is_an_unknown_stage_with_the_reason(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def raising(*args: Any, **kwargs: Any) -> stages.StageAttribution:
        raise ValueError("zip() argument 2 is longer than argument 1")

    monkeypatch.setattr(tasks, "attribute_stage", raising)
    x = torch.randn(8)
    found = tasks.stage_of(
        StageQuery(JudgeSettings(), stages.ExpectedFailure()), make_fx(doubled)(x), [x], {}
    )
    assert found.stage == "unattributed"
    assert found.summary == (
        "stage unknown: its attribution stopped on "
        "ValueError: zip() argument 2 is longer than argument 1"
    )
