"""A capturing backend sees every graph it compiles lowered, whatever Inductor's caches on disk
hold: a user's machine keeps its cache between runs, and a graph answered from it would reach
no hook, and be judged by nothing."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
import torch

from pytest_torchcompile.torch_internals.compiling import reset
from pytest_torchcompile.torch_internals.interception import capturing_backend


def noisy(x: torch.Tensor) -> torch.Tensor:
    return torch.relu(x) * 2 + torch.rand_like(x)


def test_a_graph_in_aot_autograds_cache_is_still_lowered_through_the_hook(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import torch._functorch.config as functorch_config
    import torch._inductor.config as inductor_config

    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path))
    lowered: list[torch.fx.GraphModule] = []

    def hook(
        gm: torch.fx.GraphModule,
        inputs: Sequence[Any],
        kwargs: dict[str, Any],
        compile_fn: Callable[[], Any],
    ) -> Any:
        lowered.append(gm)
        return compile_fn()

    x = torch.randn(64)
    with (
        functorch_config.patch(enable_autograd_cache=True),
        inductor_config.patch(fx_graph_cache=True),
    ):
        for backend in ("inductor", "inductor", capturing_backend(hook)):
            # The first compile fills the caches; the second shows they answer a plain compile.
            reset()
            torch.compile(noisy, backend=backend, fullgraph=True, dynamic=False)(x)
    reset()
    assert len(lowered) == 1
