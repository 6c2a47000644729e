"""What the checking runner asks to hear of each graph Inductor receives (the child that would
confirm its findings starts then) sees every graph, sizes among its inputs, and cannot fail the
test's compile."""

from __future__ import annotations

import torch

from pytest_torchcompile.checking.masked import graph_device
from pytest_torchcompile.checking.plain import GraphChecker
from pytest_torchcompile.common.verdict import DEFAULT_TOLERANCE
from pytest_torchcompile.judging.capture import CapturedGraph
from pytest_torchcompile.torch_internals.compiling import reset


def scaled_rows(x: torch.Tensor) -> torch.Tensor:
    return x * x.shape[0]


def test_a_graph_with_size_inputs_is_told_with_its_device() -> None:
    devices: list[str | None] = []
    checker = GraphChecker(
        DEFAULT_TOLERANCE,
        check_non_float=True,
        intermediates=False,
        on_lowering=lambda graph: devices.append(graph_device(graph)),
    )
    reset()
    try:
        with checker.watching():
            compiled = torch.compile(scaled_rows, dynamic=True)
            compiled(torch.randn(4, 3))
        assert any(
            not isinstance(spec, torch.Tensor) for spec in checker.capture.graphs[0].calls[0]
        )
    finally:
        checker.release()
        reset()
    assert devices == [None]
    assert checker.tally.failures == []


def test_an_observer_that_raises_leaves_the_compile_alone() -> None:
    def broken(graph: CapturedGraph) -> None:
        raise RuntimeError("observer")

    checker = GraphChecker(
        DEFAULT_TOLERANCE, check_non_float=True, intermediates=False, on_lowering=broken
    )
    reset()
    try:
        with checker.watching():
            result = torch.compile(scaled_rows)(torch.ones(2, 3))
    finally:
        checker.release()
        reset()
    assert torch.equal(result, torch.full((2, 3), 2.0))
