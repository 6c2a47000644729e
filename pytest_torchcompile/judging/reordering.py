"""Second legitimate evaluations of a model's eager run: the batch in reverse order, 4-D inputs
in channels-last memory, and Inductor's decomposed graphs run by eager kernels.

A gradient that sums over the batch sums in another order then, and a result that is one of many
roundings of the same quantity shows how far another rounding may fall from fp64. Eager's own
error is one sample of that spread, and sometimes a lucky one: a batch-norm bias gradient that
eager computes 200 times closer to fp64 than the reversed batch does (torchvision
``regnet_y_400mf``, fp32 training, CUDA), which compiled code then "fails" by that factor. A
convolution fed channels-last inputs runs in that layout, with the algorithms it picks there, as
Inductor's layout optimization runs it: torchvision's ``vgg11_bn`` (fp32 training, CUDA, dropout
in its classifier, so no reversed batch) had every convolution's weight gradient 2.1 to 7.5 times
further from fp64 compiled than eager. The fp64 rule measures compiled code against the largest
of these errors (:func:`rule.within_noise`).

An output counts only where the evaluation is an exact symmetry of it: its fp64 run, mapped back
(reversed again along its first dimension, or as it is), matches the fp64 run to within fp64's
rounding. Anything else (an output that mixes the batch in order, a first dimension that is not
the batch, random draws that land elsewhere) gets no second sample and is judged as before.

The decomposed graphs (AOT autograd with Inductor's decompositions and partitioner, run eagerly:
``aot_eager_decomp_partition``) are the computation Inductor is handed, rounded by eager kernels:
timm's ``mobileone_s0`` (fp32 training, CUDA, activations near 1e12) had one gradient 19,800 fp32
epsilons of its rms from fp64 eagerly, 40,600 decomposed and 87,200 compiled, a ratio of 4.4 that
only this evaluation explains. A wrong decomposition shows in it too, so its sample counts only
twice over: where the decomposed graphs run in fp64 give the fp64 reference (a decomposition
that changes the computed quantity changes it in fp64 as well, far beyond fp64's rounding), and
at most :data:`DECOMPOSED_CAP` times eager's own error (a decomposition right in fp64 but weaker
in fp32, or wrong in one dtype's branch only, moves compiled code that far at most).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from pytest_torchcompile.judging.oracle import flatten_outputs

Arguments = tuple[tuple[Any, ...], dict[str, Any]]

FP64_SYMMETRY_TOLERANCE = 1e-9
"""How far, relative to the fp64 values' largest magnitude, the fp64 run of the reversed batch
may be from the fp64 run for the reversal to count as a symmetry of an output: far above fp64's
rounding (1e-16, amplified by cancellation), far below what any change of the computed quantity
gives."""


DECOMPOSED_CAP = 2.0
"""The decomposed evaluation's error counts up to this many times eager's own error from fp64, so
compiled code may be ``multiplier`` times this many times eager's error where the decomposed
graphs are that noisy. mobileone_s0's gradient needs 1.47 (87,200 epsilons compiled, multiplier
3, eager 19,800; its decomposed run 40,600, 2.05 times eager's); eca_nfnet_l0's failing stem
gradients (160,000 to 845,000 epsilons compiled) had eager and decomposed within 80 epsilons,
at most 1.26 times apart."""


def reversed_batch(arguments: Arguments) -> tuple[Arguments, int] | None:
    """The arguments with every tensor whose first dimension is the batch (the first tensor
    argument's first dimension, of at least 2) reversed along it, and the batch size; None where
    there is no such batch."""
    tensors = [
        value
        for value in (*arguments[0], *arguments[1].values())
        if isinstance(value, torch.Tensor) and value.dim() > 0
    ]
    if not tensors or tensors[0].shape[0] < 2:
        return None
    batch = int(tensors[0].shape[0])

    def reverse(value: Any) -> Any:
        if isinstance(value, torch.Tensor) and value.dim() > 0 and value.shape[0] == batch:
            return value.detach().flip(0).requires_grad_(value.requires_grad)
        return value

    return (
        tuple(reverse(a) for a in arguments[0]),
        {k: reverse(v) for k, v in arguments[1].items()},
    ), batch


def channels_last(arguments: Arguments) -> Arguments | None:
    """The arguments with every 4-D floating tensor in channels-last memory (a convolution fed one
    runs in that layout); None where no tensor argument is 4-D or all already are."""

    def image_like(value: Any) -> bool:
        return isinstance(value, torch.Tensor) and value.dim() == 4 and value.is_floating_point()

    def laid_out(value: Any) -> Any:
        if image_like(value):
            return (
                value.detach()
                .contiguous(memory_format=torch.channels_last)
                .requires_grad_(value.requires_grad)
            )
        return value

    if all(
        value.is_contiguous(memory_format=torch.channels_last)
        for value in (*arguments[0], *arguments[1].values())
        if image_like(value)
    ):
        return None
    return tuple(laid_out(a) for a in arguments[0]), {
        k: laid_out(v) for k, v in arguments[1].items()
    }


def noise_floors(
    eager_reordered: dict[str, Any],
    fp64_reordered: dict[str, Any],
    reference: dict[str, Any],
    batch: int | None,
) -> dict[str, float]:
    """By output path: the rmse against fp64 of a second evaluation's eager run, mapped back, for
    every floating output that the evaluation is an exact symmetry of (the module docstring).
    ``batch``: the batch size where the batch was reversed, None where the values kept their
    places."""
    floors: dict[str, float] = {}
    for root, value in reference.items():
        expected = dict(flatten_outputs(value, root))
        reordered_fp64 = dict(flatten_outputs(fp64_reordered.get(root), root))
        for path, eager in flatten_outputs(eager_reordered.get(root), root):
            wide, again = expected.get(path), reordered_fp64.get(path)
            if not (
                isinstance(eager, torch.Tensor)
                and isinstance(wide, torch.Tensor)
                and isinstance(again, torch.Tensor)
                and wide.is_floating_point()
                and eager.shape == wide.shape
            ):
                continue
            mapped = _mapped_back(again, wide, batch)
            if mapped is not None:
                floors[path] = _rmse(mapped(eager.detach()), wide.detach())
    return floors


def raise_floors(
    floors: dict[str, float], deciding: dict[str, str], found: dict[str, float], source: str
) -> bool:
    """Raise ``floors`` (by output path) to ``found`` where that is larger, naming ``source`` in
    ``deciding`` for each floor it raised; whether it raised any."""
    raised = False
    for path, floor in found.items():
        if floor > floors.get(path, 0.0):
            floors[path], deciding[path], raised = floor, source, True
    return raised


def capped(
    floors: dict[str, float],
    eager: dict[str, Any],
    reference: dict[str, Any],
    cap: float = DECOMPOSED_CAP,
) -> dict[str, float]:
    """``floors`` (by output path) each at most ``cap`` times eager's rmse from fp64 for that
    output; an output without a floating eager value and fp64 value gets none."""
    limited: dict[str, float] = {}
    for root, value in reference.items():
        expected = dict(flatten_outputs(value, root))
        for path, result in flatten_outputs(eager.get(root), root):
            wide = expected.get(path)
            if (
                path in floors
                and isinstance(result, torch.Tensor)
                and isinstance(wide, torch.Tensor)
                and wide.is_floating_point()
                and result.shape == wide.shape
            ):
                limited[path] = min(floors[path], cap * _rmse(result.detach(), wide.detach()))
    return limited


def _mapped_back(
    reordered_fp64: torch.Tensor, fp64: torch.Tensor, batch: int | None
) -> Callable[[torch.Tensor], torch.Tensor] | None:
    """How to map a result of the second evaluation back onto the original one (reverse its first
    dimension again where the batch was reversed, or leave it), where that makes its fp64 value
    the original's; else None."""
    if reordered_fp64.shape != fp64.shape:
        return None
    largest = (
        float(fp64.detach().abs().nan_to_num(posinf=0.0, neginf=0.0).max()) if fp64.numel() else 0.0
    )
    flipped: list[Callable[[torch.Tensor], torch.Tensor]] = (
        [lambda t: t.flip(0)]
        if batch is not None and fp64.dim() > 0 and fp64.shape[0] == batch
        else []
    )
    for candidate in [*flipped, lambda t: t]:
        difference = (candidate(reordered_fp64.detach()) - fp64.detach()).abs()
        if bool(
            torch.all(
                (difference <= FP64_SYMMETRY_TOLERANCE * largest)
                | (difference != difference)
                | torch.isinf(fp64.detach())
            )
        ):
            return candidate
    return None


def _rmse(value: torch.Tensor, reference: torch.Tensor) -> float:
    finite = value.isfinite() & reference.isfinite()
    if not bool(finite.any()):
        return 0.0
    return float(
        torch.sqrt(
            torch.mean(
                torch.square(
                    reference[finite].double() - value[finite].double().to(reference.device)
                )
            )
        )
    )
