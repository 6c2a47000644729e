"""Gradients that are rounding noise pass, however a decomposed backward rounds them: a gradient
summed over many terms carries rounding that grows with its scale (slack relative to the fp64
reference's magnitude), and one that cancels to nearly zero (a convolution's bias before batch
norm: eager's own error a good part of it) gets ``same()``'s largest multiplier. A real deviation
still fails, and a small tensor that is no noise keeps its multiplier."""

from __future__ import annotations

import torch

from pytest_torchcompile.judging.rule import leaf_verdict

TOL = 1e-4


def _noisy(reference: torch.Tensor, scale: float, seed: int) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    return (reference + torch.randn(reference.shape, generator=generator, dtype=torch.float64) * scale).float()


def _weight_gradient() -> torch.Tensor:
    """A convolution's weight gradient: scale about 90, some elements cancelling to nearly zero."""
    generator = torch.Generator().manual_seed(0)
    reference = torch.randn(64, 3, 3, 3, generator=generator, dtype=torch.float64) * 90
    reference[::7] *= 1e-6
    return reference


def test_a_large_gradients_rounding_three_times_eagers_passes() -> None:
    # Measured on conv(3, 64) + BatchNorm2d + ReLU + MaxPool2d, batch 4 of 32x32, loss out.sum():
    # eager 5.3e-05 from fp64, Inductor's backward 1.6e-04 (2.8 times), both about 1e-6 of the scale.
    reference = _weight_gradient()
    eager, compiled = _noisy(reference, 5e-5, 1), _noisy(reference, 1.6e-4, 2)
    passed, rule, figures = leaf_verdict(compiled, eager, reference, TOL)
    assert (passed, rule) == (True, "fp64 rmse"), figures


def test_a_small_gradient_of_rounding_noise_around_zero_passes() -> None:
    reference = torch.randn(64, dtype=torch.float64, generator=torch.Generator().manual_seed(3)) * 3e-4
    eager, compiled = _noisy(reference, 2e-5, 1), _noisy(reference, 1.2e-4, 2)
    passed, rule, figures = leaf_verdict(compiled, eager, reference, TOL)
    assert (passed, rule, figures[2]) == (True, "fp64 rmse", 10.0), figures


def test_a_real_deviation_of_a_large_or_small_gradient_still_fails() -> None:
    reference = _weight_gradient()
    eager = _noisy(reference, 5e-5, 1)
    assert not leaf_verdict(_noisy(reference, 1e-2, 2), eager, reference, TOL)[0]
    wrong = eager.clone()
    wrong[5, 1, 2, 0] += 1.0  # one element off by one part in a hundred of the scale
    assert not leaf_verdict(wrong, eager, reference, TOL)[0]
    small = torch.randn(64, dtype=torch.float64, generator=torch.Generator().manual_seed(3)) * 3e-4
    small_eager = _noisy(small, 2e-5, 1)
    assert not leaf_verdict(_noisy(small, 5e-4, 2), small_eager, small, TOL)[0]


def test_a_small_gradient_that_is_no_noise_keeps_the_small_tensor_multiplier() -> None:
    """Eager's error a millionth of its scale: a compiled error four times that fails."""
    reference = torch.linspace(1, 2, 64, dtype=torch.float64)
    eager, compiled = _noisy(reference, 1e-5, 1), _noisy(reference, 4e-5, 2)
    passed, rule, figures = leaf_verdict(compiled, eager, reference, 1e-6)
    assert (passed, rule, figures[2]) == (False, "fp64 rmse", 3.0), figures
