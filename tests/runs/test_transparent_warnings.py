"""The plugin's own imports leave the warnings a test sees as they are without it: a module's
first import warns once, and that warning is the test's (under ``-W error``, its failure)."""

from __future__ import annotations

import json

import pytest

SUITE = """
import pytest

def test_the_compiler_warns_as_first_imported():
    with pytest.warns(DeprecationWarning, match="script_method"):
        import torch._inductor.compile_fx
"""


@pytest.mark.parametrize("checked", [False, True], ids=["report only", "checked"])
def test_first_import_warnings_reach_the_test_with_a_report(pytester: pytest.Pytester, checked: bool) -> None:
    pytester.makepyfile(SUITE)
    # A process of its own: this one imported the compiler long ago, and its first import is the point.
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--compile-accuracy-report", "report.json",
                                           *(["--compile-accuracy"] if checked else []))
    result.assert_outcomes(passed=1)
    environment = json.loads((pytester.path / "report.json").read_text())["environment"]
    assert environment["torch"] and "inductor_config" in environment
