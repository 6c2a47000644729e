"""A suite that runs under ``-W error`` (as model repositories do) runs with the plugin on:
the plugin itself warns of nothing, on every torch it supports."""

from __future__ import annotations

import importlib.metadata
import re

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
    requirements = [
        Requirement(text) for text in importlib.metadata.requires("pytest-torchcompile") or []
    ]
    assert "numpy" in {
        requirement.name for requirement in requirements if requirement.marker is None
    }


def test_a_checked_suite_passes_under_w_error(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(SUITE)
    # pytest-benchmark, where installed, warns in its pytest_configure when it finds xdist on (an
    # xdist worker's environment is enough), and -W error makes that an INTERNALERROR of any run.
    result = pytester.runpytest_subprocess(
        "-W", "error", "--compile-accuracy", "-p", "no:cacheprovider", "-p", "no:benchmark"
    )
    result.assert_outcomes(passed=2)
    assert "warning" not in (result.stdout.str() + result.stderr.str()).lower()


TWO_FAILURES = """
import pytest
import torch

BUG = {"cpp.inject_relu_bug_TESTING_ONLY": "accuracy"}


@pytest.mark.inductor_repro(inductor_config=BUG)
def test_first(compile_accuracy):
    compile_accuracy(lambda x: torch.relu(x) * 2, torch.randn(16))


@pytest.mark.inductor_repro(inductor_config=BUG)
def test_second(compile_accuracy):
    compile_accuracy(lambda x: torch.relu(x - 1) + 3, torch.randn(16))
"""


@pytest.mark.slow  # two minifications; test_a_checked_suite_passes_under_w_error stays in the default run
def test_every_failing_check_of_a_process_gets_a_loading_minified_repro_under_w_error(
    pytester: pytest.Pytester,
) -> None:
    # The first repro loaded in a process must leave Inductor's config as the user had it: on
    # torch 2.15, writing every key back made the next repro's config unreadable and touched
    # deprecated keys, whose warnings -W error raises.
    pytester.makepyfile(TWO_FAILURES)
    # Under -W error over the plugin's own imports: a process of its own.
    result = pytester.runpytest_subprocess(
        "-W", "error", "--compile-accuracy", "-p", "no:cacheprovider", "-p", "no:benchmark"
    )
    result.assert_outcomes(failed=2)
    output = result.stdout.str() + result.stderr.str()
    # (A failing test's captured log may hold torch's own logging, a CUDA build's on a CPU host.)
    assert "warnings summary" not in output and not re.search(r"[A-Za-z]+Warning\b", output)
    assert "defect of pytest-torchcompile" not in output
    minified = sorted((pytester.path / ".compile-accuracy").glob("*/minified.py"))
    assert len(minified) == 2
    for path in minified:
        assert "load_config" not in path.read_text()
