"""What the plugin compiles inside :func:`unobserved` leaves no trace in what a suite reads of
the compiler: Dynamo's counters, its frame and compile-id counters, Inductor's metrics."""

from __future__ import annotations

import copy
from typing import Any

import torch
import torch._dynamo.convert_frame
import torch._functorch.aot_autograd
import torch._inductor.metrics
from torch._dynamo.utils import counters

from pytest_torchcompile.torch_internals.compiling import no_compile_caches, reset
from pytest_torchcompile.torch_internals.observable import unobserved


def readings() -> dict[str, Any]:
    return {
        "counters": copy.deepcopy({kind: dict(counts) for kind, counts in counters.items()}),
        "frames": torch._dynamo.convert_frame.FRAME_COUNTER,
        "aot graphs": repr(torch._functorch.aot_autograd.AOT_COUNTER),
        "kernels": torch._inductor.metrics.generated_kernel_count,
    }


def test_a_compile_aside_leaves_no_trace() -> None:
    counters["inductor"]["counted_by_the_suite"] += 1
    before = readings()
    with unobserved(), no_compile_caches():
        torch.compile(lambda x: torch.relu(x) @ x)(torch.randn(8, 8))
        changed = readings()
        # Dynamo's reset sets its frame counter back to 0: inside, as the plugin's own resets are.
        reset()
    assert changed != before
    assert readings() == before
