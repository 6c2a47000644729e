"""A run whose output paths clash (an output at an input, two outputs at one path) stops before
any test with one line naming both settings, and leaves every file as it was."""

from __future__ import annotations

import pytest

pytest_plugins = ["pytester"]

TEST = "test_model.py::test_plain"


@pytest.mark.parametrize(
    ("options", "named"),
    [
        (
            ["--compile-accuracy-report=same.txt", "--compile-accuracy-baseline=same.txt"],
            "--compile-accuracy-baseline and --compile-accuracy-report",
        ),
        (
            ["--compile-accuracy-report=out.xml", "--junitxml=out.xml"],
            "--compile-accuracy-report and --junitxml",
        ),
    ],
)
def test_clashing_output_paths_are_a_one_line_usage_error(
    pytester: pytest.Pytester, options: list[str], named: str
) -> None:
    pytester.makepyfile(test_model="def test_plain():\n    pass\n")
    baseline = pytester.path / "same.txt"
    baseline.write_text(f"{TEST}\tpass\n")

    result = pytester.runpytest("--compile-accuracy", *options)

    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert result.stderr.lines[0].startswith(f"ERROR: compile accuracy: {named} name one path")
    assert "passed" not in result.stdout.str()
    assert baseline.read_text() == f"{TEST}\tpass\n"
    assert not (pytester.path / "out.xml").exists()
