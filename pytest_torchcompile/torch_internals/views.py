"""A tensor's negative and conjugate bits: views torch applies as it reads the tensor's memory,
which a copy of that memory leaves behind (``x.conj()``, and the real or imaginary part of one,
``x.conj().imag``, are such views). Compiled code is built for the bits its inputs had, so a copy
that stands for an input keeps them.

Embedded in every full repro file with ``judging/copies.py``: torch and the standard library
only.
"""

from __future__ import annotations

import torch


def unviewed(value: torch.Tensor) -> torch.Tensor:
    """``value`` with its negative and conjugate bits off: a view whose values are those its
    memory holds (``value``'s negated or conjugated where a bit was set)."""
    if value.is_conj():
        value = value.conj()
    if value.is_neg():
        value = torch._neg_view(value)
    return value


def viewed(memory: torch.Tensor, neg: bool, conj: bool) -> torch.Tensor:
    """``memory``, a tensor that holds another's memory (:func:`unviewed`), viewed as that one
    is: with its negative bit (``neg``) and its conjugate bit (``conj``)."""
    if neg:
        memory = torch._neg_view(memory)
    if conj:
        memory = memory.conj()
    return memory
