"""Models more than one test module checks. ``tests/`` is on ``sys.path`` through its conftest."""

from __future__ import annotations

import torch


def sin_relu_cos(x: torch.Tensor) -> torch.Tensor:
    """A relu between 20 sines and 40 cosines: a wrong relu is masked at the output."""
    for _ in range(20):
        x = x.sin()
    x = x.relu()
    for _ in range(40):
        x = x.cos()
    return x
