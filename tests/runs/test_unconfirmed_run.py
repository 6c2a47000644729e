"""A finding that its repro does not confirm in a fresh process fails no test: the run says
`unconfirmed`, in the terminal, the JSON report and JUnit."""

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
def test_a_finding_its_repro_does_not_confirm_fails_no_test_and_is_reported_unconfirmed(
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

    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        [
            "unconfirmed *test_model.py::test_gated",
            "*unconfirmed: its repro, judged in a fresh process, passes*",
            "*1 checks in 1 tests: 1 unconfirmed",
        ]
    )
    (check,) = json.loads((pytester.path / "report.json").read_text())["tests"][0]["checks"]
    assert check["status"] == "unconfirmed" and "fresh process" in check["unconfirmed"]
    assert 'name="torchcompile_unconfirmed"' in (pytester.path / "junit.xml").read_text()
