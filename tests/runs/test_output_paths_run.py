"""A run whose output paths clash (an output at an input, two outputs at one path) stops before
any test with one line naming both settings, and leaves every file as it was."""

from __future__ import annotations

import fnmatch

import pytest
from inline import runpytest

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


@pytest.mark.parametrize(
    ("options", "path", "named"),
    [
        (["--compile-accuracy-report=sub/test_other.py"], "sub/test_other.py", "a test file"),
        (["--compile-accuracy-html=sub/conftest.py"], "sub/conftest.py", "a conftest.py"),
        (["--compile-accuracy-report=pytest.ini"], "pytest.ini", "the ini file"),
        (["--junitxml=sub/test_other.py"], "sub/test_other.py", "a test file"),
        (["--compile-accuracy-report=sub/test_broken.py"], "sub/test_broken.py", "a test file"),
        (
            ["--compile-accuracy-report=sub/test_other.py", "-n", "2"],
            "sub/test_other.py",
            "a test file",
        ),
    ],
)
def test_an_output_at_a_file_the_run_reads_is_refused_before_any_test(
    pytester: pytest.Pytester, options: list[str], path: str, named: str
) -> None:
    pytester.makepyfile(test_model="def test_plain():\n    pass\n")
    (pytester.path / "pytest.ini").write_text("[pytest]\n")
    sub = pytester.mkpydir("sub")
    (sub / "conftest.py").write_text("# the suite's conftest\n")
    (sub / "test_other.py").write_text("def test_other():\n    pass\n")
    (sub / "test_broken.py").write_text("raise ImportError('broken')\n")
    before = {name: (pytester.path / name).read_bytes() for name in [path, "test_model.py"]}

    result = runpytest(pytester, "--compile-accuracy", *options)

    assert result.ret == pytest.ExitCode.USAGE_ERROR
    (line,) = [line for line in result.stderr.lines if line.startswith("ERROR: ")]
    written = options[0].split("=")[0]
    assert fnmatch.fnmatchcase(
        line,
        f"ERROR: compile accuracy: {named} and {written} name one path, for an input and an "
        f"output: *{path}",
    ), line
    assert "passed" not in result.stdout.str()
    assert {name: (pytester.path / name).read_bytes() for name in before} == before
