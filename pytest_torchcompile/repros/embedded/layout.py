"""Inputs as the test had them: values laid out with their size, stride and storage offset."""

import os
from typing import Any

import torch

from pytest_torchcompile.repros.embedded.head import HERE


# fmt: off
# A compact repro file embeds this function too, and stays within the line count of torch's own
# minified repro: kept as written.
def _laid_out(values: torch.Tensor, dtype: torch.dtype, shape: tuple[int, ...], stride: tuple[int, ...], device: str, offset: int) -> torch.Tensor:  # values (dense) laid out as the input was: compiled code may assume its size, stride and storage offset; a stride 0 dim shares its memory
    storage = torch.empty(offset + (1 + sum((n - 1) * s for n, s in zip(shape, stride, strict=True)) if all(shape) else 0), dtype=dtype, device=device)
    storage[torch.arange(storage.numel(), device=device).as_strided(shape, stride, offset).reshape(-1)] = values.to(dtype=dtype, device=device).reshape(-1)
    return torch.empty(0, dtype=dtype, device=device).set_(storage.untyped_storage(), offset, shape, stride)
# fmt: on


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
