"""What a compile intercepted under the random-op config compiles each lowered graph with: a
graph that draws random numbers under that config, any other as the user's compile has it."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
import torch.fx

from pytest_torchcompile.torch_internals.compiling import reset
from pytest_torchcompile.torch_internals.interception import intercept_inductor
from pytest_torchcompile.torch_internals.rng import EAGER_RNG_CONFIG


def compiled_with(*compiles: tuple[Callable[..., Any], dict[str, Any]]) -> list[tuple[bool, bool]]:
    """(fallback_random, layout_optimization) as each lowered graph of the compiles saw them."""
    import torch._inductor.config as inductor_config

    seen: list[tuple[bool, bool]] = []

    def hook(gm: torch.fx.GraphModule, inputs: Sequence[Any], kwargs: dict[str, Any], compile_fn: Callable[[], Any]) -> Any:
        seen.append((inductor_config.fallback_random, inductor_config.layout_optimization))
        return compile_fn()

    reset()
    try:
        with intercept_inductor(hook, None, EAGER_RNG_CONFIG):
            for fn, options in compiles:
                torch.compile(fn, options=options)(torch.randn(8))
    finally:
        reset()
    return seen


def test_a_graph_that_draws_compiles_with_eagers_generator_and_layout() -> None:
    assert compiled_with((lambda x: torch.nn.functional.dropout(x, 0.5, True) + 1, {})) == [(True, False)]


def test_a_graph_that_draws_nothing_keeps_the_users_compile_options() -> None:
    """The user's ``options`` are in force when a lowered graph compiles; setting back the names
    of the random config took the layout back to the value from before them."""
    assert compiled_with((lambda x: x.sin() + 1, {"layout_optimization": False}),
                         (lambda x: x.cos() + 1, {})) == [(False, False), (False, True)]
