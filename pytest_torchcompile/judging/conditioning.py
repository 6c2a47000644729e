"""An output's conditioning: how far a rounding-sized change of what it is computed from moves it.

An output that still fails by the fp64 rule after the other legitimate evaluations is measured
once more: eager runs on inputs (and a model's weights, not its buffers) nudged by a unit in the
last place. The largest nudged error counts as one more evaluation's; an output that a nudge moves
far beyond eager's own error is discontinuous there (a jump across a tie: max pooling, a ReLU's
edge, a floor), and compiled code that lands within a few times the nudged error is
inconclusive, not failing. The fixture's check (``checking/model.py``) and the judging of a plain
``torch.compile`` call's graphs (``checking/plain.py``) both judge through :func:`conditioned`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import torch

from pytest_torchcompile.common.leaves import LeafRule
from pytest_torchcompile.common.verdict import Comparison
from pytest_torchcompile.judging.reordering import noise_floors, raise_floors

CONDITIONING_SPREAD = 10.0
"""How many times eager's own error from fp64 a unit in the last place of the inputs and weights
must move an output for it to count as discontinuous there (:func:`judged_discontinuous`).
Rounding alone moves a continuous result by a small factor of eager's error (reordered sums: 1 to
3 times in the sweeps of docs/log/gpu); a jump across a tie (max pooling, a ReLU's edge) moves it by
orders of magnitude: timm's ``hgnetv2_b0`` in fp32 training (H100) had a stem convolution's weight
gradient 1.2e-4 from fp64 eagerly and 3.7e-2 with its input nudged by one unit in the last place,
a bias gradient 3.6e-6 and 4.9e-4."""

DISCONTINUITY_CAP = 5.0
"""An output that a unit in the last place moves discontinuously cannot be judged by rounding:
compiled code that lands within this many times the largest nudged run's error of fp64 is
inconclusive, further out it fails (a wrong result moves the continuous outputs beside it too).
hgnetv2_b0's bias gradient: compiled 1.9e-3, nudged runs up to 4.9e-4."""

NUDGED_RUNS = 3
"""Eager runs with inputs and weights nudged (seeds 1 to 3): each costs an eager run, on the
failing path only, once the other evaluations have not overturned the verdict."""

NUDGED_FLOOR = (
    "eager with its inputs and weights nudged by a unit in the last place (the output's "
    "conditioning)"
)


def nudged(value: Any, generator: torch.Generator) -> Any:
    """A floating tensor with each element moved up or down, at random, by about a unit in the
    last place of its dtype (a relative change of the dtype's epsilon); anything else as it is."""
    if not isinstance(value, torch.Tensor) or not value.is_floating_point() or not value.numel():
        return value
    signs = torch.randint(0, 2, value.shape, generator=generator).to(value.device) * 2 - 1
    factor = 1 + signs.to(torch.float64) * torch.finfo(value.dtype).eps
    moved = (value.detach().to(torch.float64) * factor).to(value.dtype)
    return moved.requires_grad_(value.requires_grad) if value.is_leaf else moved


def conditioned(
    comparison: Comparison,
    judge: Callable[[dict[str, float], dict[str, str]], Comparison],
    nudged_run: Callable[[int], dict[str, Any]],
    reference: dict[str, Any],
    floors: dict[str, float],
    deciding: dict[str, str],
) -> tuple[Comparison, dict[str, float]]:
    """``comparison`` judged again with the conditioning of each output failing by the fp64 rule,
    and those outputs found discontinuous (with their largest nudged error from fp64).

    ``judge``: the comparison again with floors (and what gave each); ``nudged_run``: eager's
    results by output root on inputs nudged with a seed (it raises where the computation refuses
    nudged values: no sample); ``reference``: the fp64 results by root. ``floors`` and
    ``deciding`` are those found so far, and gain the nudged ones (a caller judging another run
    later judges it with the same)."""
    failing = comparison.failing_by_fp64_rule
    if not failing:
        return comparison, {}
    nudged_errors = _nudged_errors(nudged_run, reference, failing)
    raise_floors(floors, deciding, nudged_errors, NUDGED_FLOOR)
    discontinuous = {
        leaf.path: nudged_errors[leaf.path]
        for leaf in comparison.failing
        if leaf.path in nudged_errors
        and leaf.rmse_eager is not None
        and nudged_errors[leaf.path] >= CONDITIONING_SPREAD * leaf.rmse_eager
    }
    return judged_discontinuous(judge(floors, deciding), discontinuous), discontinuous


def _nudged_errors(
    nudged_run: Callable[[int], dict[str, Any]], reference: dict[str, Any], failing: list[str]
) -> dict[str, float]:
    """The largest error from fp64 of each ``failing`` output over :data:`NUDGED_RUNS` runs on
    nudged inputs and weights (:func:`conditioned`)."""
    nudged_errors: dict[str, float] = {}
    for seed in range(1, NUDGED_RUNS + 1):
        try:
            results = nudged_run(seed)
        except Exception:  # a computation that refuses nudged values: no sample, nothing lost
            continue
        for path, error in noise_floors(results, reference, reference, None).items():
            if path in failing:
                nudged_errors[path] = max(error, nudged_errors.get(path, 0.0))
    return nudged_errors


def judged_discontinuous(comparison: Comparison, discontinuous: dict[str, float]) -> Comparison:
    """``comparison`` with each failing output that a unit in the last place moves
    discontinuously (``discontinuous``: its largest nudged error from fp64) inconclusive where
    compiled code is within :data:`DISCONTINUITY_CAP` times that error."""
    if not discontinuous:
        return comparison
    leaves = [
        dataclasses.replace(
            leaf,
            passed=True,
            rule=LeafRule.INCONCLUSIVE,
            detail=(
                f"discontinuous here: inputs and weights nudged by a unit in the last place move "
                f"it {discontinuous[leaf.path]:.3e} from fp64, eager {leaf.rmse_eager:.3e}, "
                f"compiled {leaf.rmse_compiled:.3e}: rounding cannot judge it"
            ),
        )
        if not leaf.passed
        and leaf.path in discontinuous
        and leaf.rmse_compiled is not None
        and leaf.rmse_compiled <= DISCONTINUITY_CAP * discontinuous[leaf.path]
        else leaf
        for leaf in comparison.leaves
    ]
    return dataclasses.replace(comparison, leaves=leaves)
