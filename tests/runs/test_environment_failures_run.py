"""A broken environment is not an Inductor bug: an Inductor cache directory that cannot be written
stops the run before any test, in one line; a compile that fails for want of a C++ compiler is
``not_judged`` with the environment's error (no repro, no bug report, no minification, no NEW
FAILURE against a baseline), for the fixture and for plain ``torch.compile`` graphs alike."""

from __future__ import annotations

import getpass
import json
import tempfile

import pytest

pytest_plugins = ["pytester"]


@pytest.fixture(autouse=True)
def wide_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    """These tests read whole lines: a run's output wraps them at the terminal's width."""
    monkeypatch.setenv("COLUMNS", "400")


SUITE = """
import pytest
import torch

NO_COMPILER = pytest.mark.inductor_repro(inductor_config={"cpp.cxx": ("/nonexistent/g++",)})


def double(x):
    return torch.relu(x) * 2


@NO_COMPILER
def test_fixture(compile_accuracy):
    out = compile_accuracy(double, torch.linspace(-1, 1, 8))
    assert torch.equal(out, torch.relu(torch.linspace(-1, 1, 8)) * 2)


@NO_COMPILER
def test_plain():
    with pytest.raises(Exception, match="InvalidCxxCompiler"):
        torch.compile(double)(torch.linspace(-1, 1, 8))
"""


def test_a_missing_compiler_is_the_environments_not_a_compile_failure(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(test_model=SUITE)
    baseline = pytester.path / "baseline.txt"
    baseline.write_text("test_model.py::test_fixture\tpass\ntest_model.py::test_plain\tpass\n")
    report = pytester.path / "report.json"
    result = pytester.runpytest(
        "--compile-accuracy",
        "--compile-accuracy-scope=all",
        f"--compile-accuracy-baseline={baseline}",
        f"--compile-accuracy-report={report}",
    )
    result.assert_outcomes(passed=2)
    assert result.ret == pytest.ExitCode.OK
    output = result.stdout.str()
    assert "NEW FAILURE" not in output and "fail_compile" not in output and "minif" not in output, (
        output
    )
    result.stdout.fnmatch_lines(
        [
            "*not_judged: the environment failed the compile, not Inductor: InvalidCxxCompiler: No working C++*"
        ]
    )
    tests = {test["nodeid"]: test for test in json.loads(report.read_text())["tests"]}
    assert {nodeid: test["status"] for nodeid, test in tests.items()} == {
        "test_model.py::test_fixture": "not_judged",
        "test_model.py::test_plain": "not_judged",
    }
    (fixture,) = tests["test_model.py::test_fixture"]["checks"]
    assert fixture["message"].startswith(
        "the environment failed the compile, not Inductor: InvalidCxxCompiler: "
    )
    (plain,) = tests["test_model.py::test_plain"]["checks"]
    assert all(
        "not judged: the environment failed the compile, not Inductor" in line
        for line in plain["unchecked"]
    )
    root = pytester.path / ".compile-accuracy"
    assert not root.exists() or not [
        path.name for path in root.iterdir() if path.name.startswith("test_")
    ]


def test_an_inductor_cache_directory_that_cannot_be_written_is_a_one_line_usage_error(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.makepyfile(test_model=SUITE)
    (pytester.path / "cache").write_text("")
    cache = pytester.path / "cache" / "inductor"
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(cache))
    result = pytester.runpytest("--compile-accuracy")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert result.stderr.lines[0] == (
        f"ERROR: compile accuracy: cannot write in Inductor's cache directory {cache} "
        "(TORCHINDUCTOR_CACHE_DIR): Not a directory; give a writable one"
    )
    assert "Traceback" not in result.stdout.str() + result.stderr.str()
    assert not (pytester.path / ".compile-accuracy").exists()


def test_a_default_inductor_cache_directory_that_cannot_be_written_is_a_one_line_usage_error(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.makepyfile(test_model=SUITE)
    monkeypatch.delenv("TORCHINDUCTOR_CACHE_DIR", raising=False)
    temporary = pytester.path / "tmp"
    temporary.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temporary))
    # Where Inductor would make its cache (tests/unit/torch_internals asks torch itself): written
    # out, as importing the plugin's torch modules here would import torch into this process.
    cache = temporary / f"torchinductor_{getpass.getuser()}"
    cache.write_text("")
    result = pytester.runpytest("--compile-accuracy")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert result.stderr.lines[0] == (
        f"ERROR: compile accuracy: cannot write in Inductor's cache directory {cache} "
        "(Inductor's default; TORCHINDUCTOR_CACHE_DIR names another): it is a file, "
        "not a directory; give a writable one"
    )
    assert "Traceback" not in result.stdout.str() + result.stderr.str()
    # No test ran, nothing was written: the temporary directory holds what it held.
    assert list(temporary.iterdir()) == [cache] and cache.read_text() == ""
    assert not (pytester.path / ".compile-accuracy").exists()
