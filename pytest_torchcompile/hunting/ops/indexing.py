"""Ops that read or write through indices: through an index tensor as large as the result
(gather, take_along_dim, scatter_add, scatter_reduce), or through distinct indices along a dim
(index_select, item indexing, index_add, scatter, index_put)."""

from __future__ import annotations

import torch
from hypothesis import strategies as st

from pytest_torchcompile.hunting.builder import Builder, Value, is_float, literal

_THROUGH_AN_INDEX = ("gather", "scatter_add", "scatter_reduce", "take_along_dim")
_KINDS = (
    "gather",
    "index_select",
    "getitem",
    "scatter_add",
    "scatter_reduce",
    "index_add",
    "index_put",
    "scatter",
    "take_along_dim",
)


def indexing(builder: Builder, a: Value) -> bool:
    t = a.tensor
    if t.dim() == 0:
        return False
    d = builder.dim(t)
    kind = builder.draw(st.sampled_from(_KINDS))
    if kind in _THROUGH_AN_INDEX:
        return _through_an_index(builder, a, d, kind)
    return _through_indices(builder, a, d, kind)


def _through_an_index(builder: Builder, a: Value, d: int, kind: str) -> bool:
    """A gather or a take_along_dim is followed by a scatter_reduce through its index."""
    t = a.tensor
    shape = [builder.draw(st.integers(1, side)) for side in t.shape]
    index = builder.index_tensor(shape, t.shape[d])
    if kind == "gather":
        builder.step(f"torch.gather({a.name}, {d}, {index})", [a])
    elif kind == "take_along_dim":
        # Broadcast against ``a`` on the other dimensions.
        shape = [
            side if i == d else builder.draw(st.sampled_from([t.shape[i], 1]))
            for i, side in enumerate(shape)
        ]
        index = builder.index_tensor(shape, t.shape[d])
        builder.step(f"torch.take_along_dim({a.name}, {index}, {d})", [a])
    # The source of a scatter as large as the index: autograd wants its gradient so.
    source = f"{a.name}[{', '.join(f':{side}' for side in shape)}]"
    if kind == "scatter_add":
        builder.step(f"{a.name}.scatter_add({d}, {index}, {source})", [a])
        return True
    return _scatter_reduce(builder, a, d, index, source)


def _scatter_reduce(builder: Builder, a: Value, d: int, index: str, source: str) -> bool:
    t = a.tensor
    reduce = builder.draw(
        st.sampled_from(["sum", "amax", "amin", "prod"] + (["mean"] if is_float(t) else []))
    )
    include = builder.draw(st.booleans())
    if t.dtype == torch.bool:
        return False
    builder.step(
        f"{a.name}.scatter_reduce({d}, {index}, {source}, {reduce!r}, include_self={include})",
        [a],
    )
    return True


def _through_indices(builder: Builder, a: Value, d: int, kind: str) -> bool:
    t = a.tensor
    # ``index_put`` indexes the first dimension.
    indices = builder.distinct_indices(t.shape[0] if kind == "index_put" else t.shape[d])
    indexed = f"torch.tensor({literal(indices)})"
    if kind == "index_select":
        builder.step(f"{a.name}.index_select({d}, {indexed})", [a])
    elif kind == "getitem":
        builder.step(f"{a.name}[{', '.join([':'] * d + [indexed])}]", [a])
    elif kind == "index_add":
        if t.dtype == torch.bool:
            return False
        source = f"{a.name}.narrow({d}, 0, {len(indices)})"
        builder.step(f"{a.name}.index_add({d}, {indexed}, {source})", [a])
    elif kind == "scatter":
        index = _permutation_rows(indexed, len(indices), d, t.shape)
        builder.step(f"{a.name}.scatter({d}, {index}, {builder.scalar(t)})", [a])
    else:
        accumulate = builder.draw(st.booleans()) and t.dtype != torch.bool
        values = f"{a.name}[{indexed}].flip(0)"
        builder.step(f"{a.name}.index_put(({indexed},), {values}, accumulate={accumulate})", [a])
    return True


def _permutation_rows(indexed: str, count: int, d: int, shape: torch.Size) -> str:
    """Distinct indices along ``d`` in every column: ``count`` rows of a permutation, expanded
    over the other dims of ``shape``."""
    expanded = [count if i == d else side for i, side in enumerate(shape)]
    rows = ", ".join(str(count) if i == d else "1" for i in range(len(shape)))
    return f"{indexed}.reshape({rows}).expand({', '.join(map(str, expanded))})"
