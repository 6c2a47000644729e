"""Ops that combine the elements along a dim: reductions (softmax among them), scans, sorting
and searching, and a matmul of a tensor with its transpose."""

from __future__ import annotations

import torch
from hypothesis import strategies as st

from pytest_torchcompile.hunting.builder import Builder, Value, is_float, literal

_FORMS = {
    "softmax": "torch.softmax({a}, {d})",
    "log_softmax": "torch.log_softmax({a}, {d})",
    "var": "{a}.var({d}, correction=0, keepdim={keepdim})",
    "std": "{a}.std({d}, correction=0, keepdim={keepdim})",
    "logsumexp": "torch.logsumexp({a}, {d}, keepdim={keepdim})",
    "norm": "torch.linalg.vector_norm({a}, dim={d})",
}
"""The reductions not written ``a.<name>(d, keepdim=...)``."""
_WHOLE = {"sum": "{a}.sum()", "amax": "{a}.amax((0,))", "prod": "{a}.prod()"}
"""The reductions drawn, one time in two, over the whole tensor (amax: over its first dim)."""


def _reductions(t: torch.Tensor) -> list[str]:
    if t.dtype == torch.bool:
        return ["sum", "any", "all"]
    names = ["sum", "amax", "amin", "prod", "argmax", "argmin", "any", "all"]
    if is_float(t):
        names += ["mean", "var", "std", "logsumexp", "norm", "softmax", "log_softmax"]
    return names


def reduction(builder: Builder, a: Value) -> bool:
    t = a.tensor
    if t.dim() == 0:
        return False
    name = builder.draw(st.sampled_from(_reductions(t)))
    d = builder.dim(t)
    keepdim = builder.draw(st.booleans())
    form = _FORMS.get(name, f"{{a}}.{name}({{d}}, keepdim={{keepdim}})")
    if name in _WHOLE and builder.draw(st.booleans()):
        form = _WHOLE[name]
    builder.step(form.format(a=a.name, d=d, keepdim=keepdim), [a])
    return True


def scan(builder: Builder, a: Value) -> bool:
    t = a.tensor
    if t.dim() == 0:
        return False
    names = ["cumsum", "cummax", "cummin"] + (
        ["cumprod", "logcumsumexp"] if is_float(t) else ["cumprod"]
    )
    name = builder.draw(st.sampled_from(names))
    d = builder.dim(t)
    if name in ("cummax", "cummin"):
        if t.dtype == torch.bool:
            return False
        builder.step(f"torch.{name}({a.name}, {d}).values", [a])
    elif name == "logcumsumexp" and t.dtype in (torch.float16, torch.bfloat16):
        builder.step(f"torch.logcumsumexp({a.name}.float(), {d})", [a])
    else:
        builder.step(f"torch.{name}({a.name}, {d})", [a])
    return True


def matmul(builder: Builder, a: Value) -> bool:
    t = a.tensor
    if not is_float(t) or t.dim() < 2:
        return False
    builder.step(f"{a.name} @ {a.name}.transpose(-1, -2)", [a])
    return True


_ORDERED = {
    "sort": "torch.sort({a}, {d}, descending={descending}).values",
    "argsort": "torch.argsort({a}, dim={d}, descending={descending}, stable=True)",
    "topk": "torch.topk({a}, {k}, {d}, largest={descending}).values",
    "kthvalue": "torch.kthvalue({a}, {k}, {d}).values",
    "median": "torch.median({a}, {d}).values",
    "msort": "torch.msort({a})",
}
"""Values in order, and stable sorts' indices (the only indices ties leave well defined); ``k``
is drawn for the ops that take it."""


def order(builder: Builder, a: Value) -> bool:
    """Sorting and searching: values of sort, topk, kthvalue, median and msort, stable sorts'
    indices, bucketize."""
    t = a.tensor
    if t.dim() == 0 or t.dtype == torch.bool:
        return False
    d = builder.dim(t)
    kind = builder.draw(st.sampled_from([*_ORDERED, "bucketize"]))
    descending = builder.draw(st.booleans())
    if kind == "bucketize":
        _bucketize(builder, a)
        return True
    k = builder.draw(st.integers(1, t.shape[d])) if kind in ("topk", "kthvalue") else None
    builder.step(_ORDERED[kind].format(a=a.name, d=d, descending=descending, k=k), [a])
    return True


def _bucketize(builder: Builder, a: Value) -> None:
    bounds = sorted(builder.draw(st.lists(st.integers(-6, 6), min_size=1, max_size=5)))
    right = builder.draw(st.booleans())
    boundaries = f"torch.tensor({literal(bounds)}, dtype={a.tensor.dtype})"
    # Eager warns of a non-contiguous input (a copy); a NaN has no place among the bounds
    # that eager's binary search defines.
    values = f"{a.name}{'.nan_to_num()' if is_float(a.tensor) else ''}.contiguous()"
    builder.step(f"torch.bucketize({values}, {boundaries}, right={right})", [a])
