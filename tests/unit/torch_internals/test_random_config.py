"""The config each lowered graph compiles with: a test's own compile, intercepted, as the test
made it, random ops and all; the plugin's own compile (a capturing backend given the random-op
config) a graph that draws random numbers under that config, any other as the options say."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
import torch.fx

from pytest_torchcompile.torch_internals.compiling import no_compile_caches, reset
from pytest_torchcompile.torch_internals.interception import capturing_backend, intercept_inductor
from pytest_torchcompile.torch_internals.rng import EAGER_RNG_CONFIG

DROPOUT = (lambda x: torch.nn.functional.dropout(x, 0.5, True) + 1, {})


def _seen() -> tuple[list[tuple[bool, bool]], Callable[..., Any]]:
    """(fallback_random, layout_optimization) as each lowered graph saw them, and the hook that notes them."""
    import torch._inductor.config as inductor_config

    seen: list[tuple[bool, bool]] = []

    def hook(
        gm: torch.fx.GraphModule,
        inputs: Sequence[Any],
        kwargs: dict[str, Any],
        compile_fn: Callable[[], Any],
    ) -> Any:
        seen.append((inductor_config.fallback_random, inductor_config.layout_optimization))
        return compile_fn()

    return seen, hook


def intercepted(*compiles: tuple[Callable[..., Any], dict[str, Any]]) -> list[tuple[bool, bool]]:
    seen, hook = _seen()
    reset()
    try:
        with intercept_inductor(hook):
            for fn, options in compiles:
                torch.compile(fn, options=options)(torch.randn(8))
    finally:
        reset()
    return seen


def captured(*compiles: tuple[Callable[..., Any], dict[str, Any]]) -> list[tuple[bool, bool]]:
    seen, hook = _seen()
    reset()
    try:
        # As a check compiles: a cached compile would skip the lowering the hook sees.
        with no_compile_caches():
            for fn, options in compiles:
                backend = capturing_backend(hook, options=options, random_config=EAGER_RNG_CONFIG)
                torch.compile(fn, backend=backend)(torch.randn(8))
    finally:
        reset()
    return seen


def test_a_tests_graph_that_draws_compiles_as_the_test_made_it() -> None:
    assert intercepted(DROPOUT) == [(False, True)]


def test_the_plugins_graph_that_draws_compiles_with_eagers_generator_and_layout() -> None:
    assert captured(DROPOUT) == [(True, False)]


def test_a_graph_that_draws_nothing_keeps_the_compile_options() -> None:
    """The ``options`` are in force when a lowered graph compiles; setting back the names of the
    random config took the layout back to the value from before them."""
    assert captured(
        (lambda x: x.sin() + 1, {"layout_optimization": False}), (lambda x: x.cos() + 1, {})
    ) == [(False, False), (False, True)]
