import math

import torch
import torch.nn.functional as F


def pooled_with_indices(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    return F.adaptive_max_pool2d(x, 2, return_indices=True)


def pooled(x: torch.Tensor) -> torch.Tensor:
    return F.adaptive_max_pool2d(x, 2)


def _image() -> torch.Tensor:
    torch.manual_seed(0)
    x = torch.randn(1, 4, 5, 5)
    x[0, 1, 2, 3] = math.nan
    return x


def test_indices(compile_accuracy) -> None:
    compile_accuracy(pooled_with_indices, _image())


def test_gradient(compile_accuracy) -> None:
    compile_accuracy(pooled, _image().requires_grad_(), backward=True)
