"""A suite that runs under ``-W error`` (as model repositories do) runs with the plugin on:
the plugin itself warns of nothing, on every torch it supports."""

from __future__ import annotations

import importlib.metadata

import pytest
from packaging.requirements import Requirement

SUITE = """
import torch

def test_fixture_check(compile_accuracy):
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.GELU()).eval()
    compile_accuracy(model, torch.randn(4, 8))

def test_plain_compile():
    fn = torch.compile(lambda x: torch.sin(x) * 2)
    fn(torch.randn(16))
"""


def test_numpy_is_a_dependency() -> None:
    # Without it torch warns on every import, which fails a run under -W error.
    requirements = [Requirement(text) for text in importlib.metadata.requires("pytest-torchcompile") or []]
    assert "numpy" in {requirement.name for requirement in requirements if requirement.marker is None}


def test_a_checked_suite_passes_under_w_error(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(SUITE)
    # pytest-benchmark, where installed, warns in its pytest_configure when it finds xdist on (an
    # xdist worker's environment is enough), and -W error makes that an INTERNALERROR of any run.
    result = pytester.runpytest_subprocess("-W", "error", "--compile-accuracy", "-p", "no:cacheprovider",
                                           "-p", "no:benchmark")
    result.assert_outcomes(passed=2)
    assert "warning" not in (result.stdout.str() + result.stderr.str()).lower()
