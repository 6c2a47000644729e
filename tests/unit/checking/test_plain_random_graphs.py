"""A test's graph that draws random numbers runs as the test compiled it (Inductor's own draws,
not eager's) and is judged through a compile of its torch-level graph aside, with eager's draws:
the test's values are those of a run without the plugin, and a wrong kernel still fails."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from pytest_torchcompile.checking.plain import SIDE_RANDOM_NOTE, GraphChecker
from pytest_torchcompile.common.verdict import DEFAULT_TOLERANCE
from pytest_torchcompile.torch_internals.compiling import reset
from pytest_torchcompile.torch_internals.config import inductor_config


def noisy(x: torch.Tensor) -> torch.Tensor:
    return torch.relu(x) + torch.rand_like(x)


def compiled(
    fn: Callable[..., Any],
    x: torch.Tensor,
    checker: GraphChecker | None = None,
    config: dict[str, Any] | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``fn`` compiled and called from seed 0, watched by ``checker`` where given: its output and
    the CPU generator's state after it."""
    reset()
    try:
        with (
            checker.watching() if checker is not None else inductor_config(None),
            inductor_config(config),
        ):
            torch.manual_seed(0)
            output = torch.compile(fn)(x)
            return output, torch.get_rng_state()
    finally:
        reset()


def test_a_random_graph_computes_what_it_computes_without_the_plugin_and_is_judged() -> None:
    x = torch.randn(256)
    checker = GraphChecker(DEFAULT_TOLERANCE, check_non_float=True, intermediates=False)
    watched, watched_generator = compiled(noisy, x, checker)
    plain, plain_generator = compiled(noisy, x)
    assert torch.equal(watched, plain) and torch.equal(watched_generator, plain_generator)
    assert (
        checker.tally.failures == []
        and checker.tally.unchecked == []
        and list(checker.tally.judged) == [0]
    )


def test_a_wrong_kernel_in_a_random_graph_fails() -> None:
    checker = GraphChecker(DEFAULT_TOLERANCE, check_non_float=True, intermediates=False)
    compiled(noisy, torch.randn(256), checker, {"cpp.inject_relu_bug_TESTING_ONLY": "accuracy"})
    (failure,) = checker.tally.failures
    assert failure.graph.index == 0 and SIDE_RANDOM_NOTE in failure.message
