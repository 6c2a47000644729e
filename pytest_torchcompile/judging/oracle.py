"""The fp64 accuracy rule and the verdict it gives.

A compiled result is judged against an fp64 reference *relative to eager's own error* in the
original dtype, as PyTorch's ``torch._dynamo.utils.same`` does: compiled may be as far from fp64 as
eager is, times a dtype-dependent multiplier. A fixed allclose would cry wolf on low precision and
miss real deviations on large values.

The rule itself is :mod:`rule`'s and one tensor's comparison :mod:`tensor_comparison`'s; this
module walks nested outputs and compares them leaf by leaf.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Iterator
from typing import Any

import torch

from pytest_torchcompile.common.leaves import LeafResult, LeafRule
from pytest_torchcompile.common.verdict import DEFAULT_TOLERANCE, Comparison
from pytest_torchcompile.judging.rule import comparable
from pytest_torchcompile.judging.tensor_comparison import (
    compare_tensor,
    differing_elements,
    written_only,
)

# --- nested outputs -------------------------------------------------------------------------


PLAIN_VALUES = (int, float, bool, str, complex, type(None), torch.dtype, torch.device)
"""Non-tensor leaves compared by equality; any other object is looked into, or left alone."""

MAX_OBJECT_DEPTH = 6


def flatten_outputs(value: Any, path: str = "out", depth: int = 0) -> Iterator[tuple[str, Any]]:
    """Yield (path, leaf) for any nesting of tuples, lists, dicts, namedtuples, dataclasses and
    ModelOutput-style objects (``OrderedDict`` subclasses), e.g. ``out[1]["logits"]``.

    Other objects (a transformers ``DynamicCache``, say) are looked into through their attributes,
    so the tensors they hold are judged like any output."""
    items = None if isinstance(value, (torch.Tensor, *PLAIN_VALUES)) else _items(value, depth)
    if items is None:
        yield path, value
        return
    for step, item in items:
        yield from flatten_outputs(item, path + step, depth + 1)


def _items(value: Any, depth: int) -> Iterator[tuple[str, Any]] | None:
    """What a nested output holds, each item with the step its path takes (``[0]``, ``.logits``);
    None for a leaf (:func:`flatten_outputs`)."""
    if isinstance(value, dict):
        return _indexed(value.items())
    if isinstance(value, tuple) and hasattr(value, "_fields"):
        return _fields(value, value._fields)
    if isinstance(value, list | tuple):
        return _indexed(enumerate(value))
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return _fields(value, (field.name for field in dataclasses.fields(value)))
    if _looked_into(value, depth):
        return _attributes(value)
    return None


def _indexed(pairs: Iterable[tuple[Any, Any]]) -> Iterator[tuple[str, Any]]:
    return ((f"[{key!r}]", item) for key, item in pairs)


def _fields(value: Any, names: Iterable[str]) -> Iterator[tuple[str, Any]]:
    return ((f".{name}", getattr(value, name)) for name in names)


def _attributes(value: Any) -> Iterator[tuple[str, Any]]:
    return ((f".{key}", item) for key, item in vars(value).items() if not key.startswith("_"))


def _looked_into(value: Any, depth: int) -> bool:
    """Whether an object of no known nesting is looked into through its public attributes: one
    that holds some, not too deep (objects refer to one another), and no class, module or
    callable."""
    return (
        hasattr(value, "__dict__")
        and depth < MAX_OBJECT_DEPTH
        and not isinstance(value, (type, torch.nn.Module))
        and not callable(value)
    )


def compare_outputs(
    compiled: Any,
    eager: Any,
    reference: Any | None,
    tol: float = DEFAULT_TOLERANCE,
    check_non_float: bool = True,
    root: str = "out",
    unjudged: dict[str, torch.Tensor] | None = None,
    noise: dict[str, float] | None = None,
    noise_from: dict[str, str] | None = None,
) -> Comparison:
    """Compare nested outputs leaf by leaf; ``reference`` None selects the weaker check. The
    elements ``unjudged`` marks, by leaf path (:func:`differing_leaves`: memory no op wrote,
    gradients through a NaN), are not judged;
    ``noise``, by leaf path, is a second legitimate evaluation's error (:mod:`reordering`), and
    ``noise_from`` names that evaluation where it is not the batch reversed or channels-last."""
    compiled_leaves = list(flatten_outputs(compiled, root))
    eager_leaves = list(flatten_outputs(eager, root))
    reference_leaves = list(flatten_outputs(reference, root)) if reference is not None else None
    structure_error = _structure_error(compiled_leaves, eager_leaves, reference_leaves)
    if structure_error is not None:
        return Comparison([], structure_error)
    references = [value for _, value in reference_leaves or []] or [None] * len(eager_leaves)
    return Comparison(
        [
            _compare_leaf(
                path,
                compiled_value,
                eager_value,
                reference_value,
                tol,
                check_non_float,
                _at(unjudged, path),
                _at(noise, path),
                _at(noise_from, path),
            )
            for (path, compiled_value), (_, eager_value), reference_value in zip(
                compiled_leaves, eager_leaves, references, strict=True
            )
        ]
    )


def _structure_error(
    compiled: list[tuple[str, Any]],
    eager: list[tuple[str, Any]],
    reference: list[tuple[str, Any]] | None,
) -> str | None:
    """How compiled outputs (or fp64's) are nested unlike eager's, or None where alike."""
    paths = [path for path, _ in eager]
    if [path for path, _ in compiled] == paths and (
        reference is None or [path for path, _ in reference] == paths
    ):
        return None
    return f"output structure differs: compiled {[path for path, _ in compiled]} vs eager {paths}"


def _at(by_path: dict[str, Any] | None, path: str) -> Any:
    """What an optional table by leaf path holds for ``path``, or None."""
    return None if by_path is None else by_path.get(path)


def _compare_leaf(
    path: str,
    compiled: Any,
    eager: Any,
    reference: Any,
    tol: float,
    check_non_float: bool,
    unjudged: torch.Tensor | None,
    noise: float | None,
    noise_from: str | None,
) -> LeafResult:
    """One output leaf of :func:`compare_outputs`: a tensor or a float by the fp64 rule, another
    plain value exactly, an opaque object not at all."""
    if isinstance(eager, torch.Tensor):
        if not isinstance(compiled, torch.Tensor):
            detail = f"compiled gave {type(compiled).__name__}"
            return LeafResult(
                path, tuple(eager.shape), str(eager.dtype), False, LeafRule.METADATA, detail=detail
            )
        return compare_tensor(
            path,
            written_only(compiled, unjudged),
            written_only(eager, unjudged),
            written_only(reference, unjudged) if isinstance(reference, torch.Tensor) else None,
            tol,
            check_non_float,
            noise,
            noise_from,
        )
    return _compare_plain_value(path, compiled, eager, reference, tol, check_non_float)


def _compare_plain_value(
    path: str, compiled: Any, eager: Any, reference: Any, tol: float, check_non_float: bool
) -> LeafResult:
    """A leaf that is no tensor: a float by the fp64 rule, another plain value exactly."""
    if isinstance(eager, float) and isinstance(compiled, float):
        return compare_tensor(
            path,
            torch.tensor(compiled),
            torch.tensor(eager),
            torch.tensor(reference, dtype=torch.float64) if isinstance(reference, float) else None,
            tol,
            check_non_float,
        )
    if not isinstance(eager, PLAIN_VALUES):
        return LeafResult(path, (), type(eager).__name__, True, LeafRule.NOT_COMPARED)
    same = compiled == eager
    return LeafResult(
        path,
        (),
        type(eager).__name__,
        bool(same) or not check_non_float,
        LeafRule.EXACT,
        detail="" if same else f"compiled {compiled!r} != eager {eager!r}",
    )


def differing_leaves(first: Any, second: Any, root: str = "out") -> dict[str, torch.Tensor]:
    """By leaf path, where two runs that filled something not a value unlike differ
    (:func:`differing_elements`)."""
    masks = {
        path: differing_elements(a, b)
        for (path, a), (_, b) in zip(
            flatten_outputs(first, root), flatten_outputs(second, root), strict=False
        )
    }
    return {path: mask for path, mask in masks.items() if mask is not None}


def first_disagreement(first: Any, second: Any, tol: float, root: str = "out") -> str | None:
    """Where two eager runs disagree (allclose at ``tol`` for floats, exact otherwise), or None."""
    first_leaves = list(flatten_outputs(first, root))
    second_leaves = list(flatten_outputs(second, root))
    if [p for p, _ in first_leaves] != [p for p, _ in second_leaves]:
        return f"{root} (its structure)"
    for (path, a), (_, b) in zip(first_leaves, second_leaves, strict=True):
        if _leaf_disagrees(a, b, tol):
            return path
    return None


def _leaf_disagrees(a: Any, b: Any, tol: float) -> bool:
    """:func:`first_disagreement` of one leaf."""
    if not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)):
        return isinstance(a, PLAIN_VALUES) and a != b
    if a.shape != b.shape or a.dtype != b.dtype:
        return True
    b = b.detach().to(a.device)
    if a.is_floating_point() or a.is_complex():
        return not torch.allclose(
            comparable(a.detach()), comparable(b), atol=tol, rtol=tol, equal_nan=True
        )
    return not torch.equal(a, b)
