"""A run on a torch without an internal the plugin uses says, once, which feature is off and
why, in its summary and its JSON report, and checks as before."""

from __future__ import annotations

import json

import pytest
import torch

CONFTEST = """
import torch

del torch._C._dispatch_dump  # as a torch without it would be
"""

SUITE = """
import torch


def test_a(compile_accuracy):
    compile_accuracy(torch.nn.Linear(8, 3), torch.randn(4, 8))


def test_b(compile_accuracy):
    compile_accuracy(lambda x: x.sin() + 1, torch.randn(4, 8))
"""

LINE = (
    f"WARNING naming the module that registers an op outside aten in a repro is off: torch "
    f"{torch.__version__} has no torch._C._dispatch_dump; a repro of such an op may need its import added by hand"
)


@pytest.mark.slow  # unit/torch_internals/test_features_off.py is its twin in the default run
@pytest.mark.parametrize("workers", ["0", "2"])
def test_a_feature_the_torch_leaves_off_is_named_once(
    pytester: pytest.Pytester, workers: str
) -> None:
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_models=SUITE)
    result = pytester.runpytest_subprocess(
        "--compile-accuracy",
        "--no-compile-accuracy-minify",
        "-n",
        workers,
        "--compile-accuracy-report",
        "report.json",
        "-p",
        "no:cacheprovider",
    )
    result.assert_outcomes(passed=2)
    said = " ".join(" ".join(result.outlines).split())  # lines wrapped at spaces, read whole
    assert said.count(LINE) == 1
    features_off = json.loads((pytester.path / "report.json").read_text())["environment"][
        "features_off"
    ]
    assert features_off == [
        {
            "feature": "naming the module that registers an op outside aten in a repro",
            "internal": "torch._C._dispatch_dump",
            "instead": "a repro of such an op may need its import added by hand",
        }
    ]


def test_a_torch_without_what_checking_needs_runs_the_tests_unjudged(
    pytester: pytest.Pytester,
) -> None:
    pytester.makeconftest(
        "import torch._inductor.compile_fx\n\n"
        "del torch._inductor.compile_fx.compile_fx_inner  # as a torch without it would be\n"
    )
    pytester.makepyfile(test_models=SUITE)
    result = pytester.runpytest_subprocess(
        "--compile-accuracy",
        "--no-compile-accuracy-minify",
        "-p",
        "no:xdist",
        "-p",
        "no:cacheprovider",
        "-vv",
    )
    result.assert_outcomes(passed=2)
    said = " ".join(" ".join(result.outlines).split())
    assert (
        said.count(
            f"not_judged: torch {torch.__version__} has no "
            "torch._inductor.compile_fx.compile_fx_inner, which checking needs; the model ran eagerly"
        )
        == 2
    )
    assert "Traceback" not in result.stdout.str()
