"""The plugin's own imports leave the warnings a test sees as they are without it: a module's
first import warns once, and that warning is the test's (under ``-W error``, its failure)."""

from __future__ import annotations

import json

import pytest

SUITE = """
import json
import warnings

def test_the_compiler_warns_as_first_imported():
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        import torch._inductor.compile_fx
    with open("seen.json", "w") as file:
        json.dump(sorted({f"{warning.category.__name__}: {warning.message}" for warning in seen}), file)
"""


def warnings_seen(pytester: pytest.Pytester, *args: str) -> list[str]:
    # A process of its own: this one imported the compiler long ago, and its first import is the point.
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", *args)
    result.assert_outcomes(passed=1)
    seen: list[str] = json.loads((pytester.path / "seen.json").read_text())
    return seen


# Two runs each; the checked one (a report too) stays in the default run.
@pytest.mark.parametrize(
    "checked", [pytest.param(False, marks=pytest.mark.slow), True], ids=["report only", "checked"]
)
def test_first_import_warnings_reach_the_test_with_a_report(
    pytester: pytest.Pytester, checked: bool
) -> None:
    # torch 2.13 warns at the compiler's first import (torch.jit.script_method is deprecated);
    # whatever a torch warns of there, the test sees it as a plain run's test does.
    pytester.makepyfile(SUITE)
    plain = warnings_seen(pytester)
    assert (
        warnings_seen(
            pytester,
            "--compile-accuracy-report",
            "report.json",
            *(["--compile-accuracy"] if checked else []),
        )
        == plain
    )
    environment = json.loads((pytester.path / "report.json").read_text())["environment"]
    assert environment["torch"] and "inductor_config" in environment
