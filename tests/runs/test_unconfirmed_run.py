"""A finding its repro does not confirm in a fresh process still fails its test where the deviation
recurs in the test's process (here: a decomposition patched there): the failure says that the repro
does not reproduce there, and why; nothing is minified."""

from __future__ import annotations

import json

import pytest

pytest_plugins = ["pytester"]

IN_PROCESS_BUG = """
import torch
import torch.nn.functional as F
from torch._inductor import decomposition
from torch._inductor.decomposition import decompositions

# A wrong silu decomposition in this process only: a fresh process judging the repro has none.
_silu = decompositions[torch.ops.aten.silu.default]
decompositions[torch.ops.aten.silu.default] = lambda x: _silu(x) * 1.01
decomposition.fast_random_decomps.cache_clear()


def test_gated(compile_accuracy):
    torch.manual_seed(0)
    out = compile_accuracy(lambda x: F.silu(x) * 2, torch.randn(8, 16))
    assert out.shape == (8, 16)
"""


@pytest.mark.slow  # unit/checking/test_confirmation_differences.py judges the finding in process
def test_a_recurring_deviation_its_repro_does_not_confirm_fails_the_test(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(test_model=IN_PROCESS_BUG)

    # A process of its own: the suite replaces a decomposition of the process it runs in.
    result = pytester.runpytest_subprocess(
        "--compile-accuracy",
        "-p",
        "no:cacheprovider",
        "--compile-accuracy-report=report.json",
        "--junitxml=junit.xml",
    )

    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*the deviation recurs in this process, but its repro, judged*"])
    (check,) = json.loads((pytester.path / "report.json").read_text())["tests"][0]["checks"]
    assert check["status"] == "fail_accuracy" and check["unconfirmed"] is None
    assert "fresh process" in check["message"] and check["minify"] is None
    assert "generates other code" in check["message"]
