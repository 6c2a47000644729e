"""Inputs as the test had them: values laid out with their size, stride and storage offset."""

import os
from typing import Any

import torch

from pytest_torchcompile.repros.embedded.head import HERE


def _laid_out(
    values: torch.Tensor,
    dtype: torch.dtype,
    shape: tuple[int, ...],
    stride: tuple[int, ...],
    device: str,
    offset: int,
) -> torch.Tensor:
    # ``values`` (dense) in memory laid out as the input was: its size, stride and storage
    # offset, which compiled code may assume; elements that share memory (stride 0) share it.
    extent = (
        1 + sum((size - 1) * step for size, step in zip(shape, stride, strict=True))
        if all(shape)
        else 0
    )
    storage = torch.empty(offset + extent, dtype=dtype, device=device)
    positions = torch.arange(offset + extent, device=device).as_strided(shape, stride, offset)
    storage[positions.reshape(-1)] = values.to(device).reshape(-1)
    return torch.empty(0, dtype=dtype, device=device).set_(
        storage.untyped_storage(), offset, shape, stride
    )


def _inline(
    values: Any,
    dtype: torch.dtype,
    shape: tuple[int, ...],
    stride: tuple[int, ...],
    device: str,
    requires_grad: bool,
    offset: int = 0,
) -> torch.Tensor:
    out = _laid_out(torch.tensor(values, dtype=dtype), dtype, shape, stride, device, offset)
    return out.requires_grad_(requires_grad)


def _load(
    name: str,
    dtype: torch.dtype,
    shape: tuple[int, ...],
    stride: tuple[int, ...],
    device: str,
    requires_grad: bool,
    offset: int = 0,
) -> torch.Tensor:
    saved = torch.load(os.path.join(HERE, "tensors", name + ".pt"), weights_only=True)
    return _laid_out(saved, dtype, shape, stride, device, offset).requires_grad_(requires_grad)
