"""Outputs in dtypes torch's comparisons lack kernels for (float8) and conjugate views: judged by
the rule as any floating or complex output, never a crash of the judging."""

from __future__ import annotations

import pytest
import torch

from pytest_torchcompile.judging.oracle import first_disagreement
from pytest_torchcompile.judging.rule import wider_than_float8, within_resolution
from pytest_torchcompile.judging.tensor_comparison import compare_tensor

FLOAT8 = [torch.float8_e4m3fn, torch.float8_e5m2, torch.float8_e4m3fnuz, torch.float8_e5m2fnuz]


@pytest.mark.parametrize("dtype", [*FLOAT8, torch.float8_e8m0fnu])
def test_each_float8_value_is_held_exactly_by_the_wider_dtype(dtype: torch.dtype) -> None:
    every = torch.arange(256, dtype=torch.uint8).view(dtype)
    wider = wider_than_float8(dtype)
    assert wider is not None
    back = every.to(wider).to(dtype)
    finite = every.to(torch.float32).isfinite()
    assert torch.equal(back.view(torch.uint8)[finite], every.view(torch.uint8)[finite])


def test_other_dtypes_are_not_widened() -> None:
    assert {wider_than_float8(d) for d in (torch.float16, torch.float32, torch.uint8)} == {None}


@pytest.mark.parametrize("dtype", FLOAT8)
def test_a_float8_output_is_judged(dtype: torch.dtype) -> None:
    fp64 = torch.linspace(-3, 3, 64, dtype=torch.float64)
    eager = fp64.to(dtype)
    assert first_disagreement(eager, eager.clone(), 1e-4) is None
    leaf = compare_tensor("out", eager.clone(), eager, fp64, tol=1e-4)
    assert leaf.passed and leaf.rule == "allclose" and leaf.dtype == str(dtype)[6:], leaf


def test_a_wrong_float8_output_fails_and_names_the_element() -> None:
    fp64 = torch.linspace(1, 2, 64, dtype=torch.float64)
    eager = fp64.to(torch.float8_e4m3fn)
    compiled = eager.clone()
    compiled[5] = -8.0
    assert first_disagreement(compiled, eager, 1e-4) == "out"
    leaf = compare_tensor("out", compiled, eager, fp64, tol=1e-4)
    assert not leaf.passed and leaf.rule == "fp64 rmse" and leaf.max_error_index == (5,), leaf


def test_a_float8_result_one_step_off_is_within_its_formats_resolution() -> None:
    # A fused kernel rounds once where eager rounds each op: values a step of the format away,
    # beyond three times eager's error, within two of the format's epsilons.
    fp64 = torch.linspace(1, 1.7, 64, dtype=torch.float64)
    eager = fp64.to(torch.float8_e5m2)
    compiled = (eager.to(torch.float16) + 0.25).to(torch.float8_e5m2)
    leaf = compare_tensor("out", compiled, eager, fp64, tol=1e-4)
    assert leaf.passed and "within float8_e5m2's resolution" in leaf.detail, leaf
    assert leaf.ratio is not None and leaf.ratio > 3


def test_the_resolution_is_the_float8_formats_not_the_wider_dtypes() -> None:
    reference = torch.ones(64, dtype=torch.float64)
    widened = torch.ones(64, dtype=torch.float16)
    error = 0.1  # under two of e5m2's epsilons (0.25), hundreds of float16's
    assert within_resolution(widened, reference, error) is None
    units = within_resolution(widened, reference, error, torch.float8_e5m2)
    assert units is not None and units == pytest.approx(0.4)


def test_a_conjugate_view_output_is_judged() -> None:
    z = torch.randn(8, dtype=torch.complex64)
    eager = z.conj()
    compiled = z.clone().conj()
    assert compiled.is_conj()
    leaf = compare_tensor("out", compiled, eager, z.to(torch.complex128).conj(), tol=1e-4)
    assert leaf.passed and leaf.rule == "allclose", leaf
    wrong = (z * 2).conj()
    assert not compare_tensor("out", wrong, eager, z.to(torch.complex128).conj(), 1e-4).passed
