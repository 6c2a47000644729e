"""Settings the plugin does not take, in whole runs: an option, an ini key or an environment
variable stops the run before any test with a usage error (exit 4) in one line; a marker's or the
fixture's keyword fails its test with that line, never as the model's ``eager_fail``."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def wide_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    """The summary lines are read whole: a run cuts them at the terminal's width."""
    monkeypatch.setenv("COLUMNS", "400")


SUITE = """
import torch


def test_linear(compile_accuracy):
    compile_accuracy(torch.nn.Linear(4, 4), torch.randn(2, 4))
"""

TORCH_SETTINGS = """
import math

import pytest
import torch


@pytest.mark.inductor_repro(tol=-1)
def test_negative_tol(compile_accuracy):
    compile_accuracy(torch.nn.Linear(4, 4), torch.randn(2, 4))


@pytest.mark.inductor_repro(tol="abc")
def test_text_tol(compile_accuracy):
    compile_accuracy(torch.nn.Linear(4, 4), torch.randn(2, 4))


@pytest.mark.inductor_repro(tol=math.nan)
def test_nan_tol(compile_accuracy):
    compile_accuracy(torch.nn.Linear(4, 4), torch.randn(2, 4))


@pytest.mark.inductor_repro(mode="max-autotun")
def test_mode_typo(compile_accuracy):
    compile_accuracy(torch.nn.Linear(4, 4), torch.randn(2, 4))


def test_negative_steps(compile_accuracy):
    compile_accuracy(torch.nn.Linear(4, 4), torch.randn(2, 4), steps=-1)


@pytest.mark.inductor_repro(inductor_config={"no.such.key": 1})
def test_config_typo(compile_accuracy):
    compile_accuracy(torch.nn.Linear(4, 4), torch.randn(2, 4))


@pytest.mark.inductor_repro(check_str="(")
def test_bad_pattern(compile_accuracy):
    compile_accuracy(torch.nn.Linear(4, 4), torch.randn(2, 4))


def test_huge_seed(compile_accuracy):
    compile_accuracy(torch.nn.Linear(4, 4), torch.randn(2, 4), seed=2**70)


def test_sizes_without_arguments(compile_accuracy):
    compile_accuracy(torch.nn.Linear(4, 4), torch.randn(2, 4), sizes=[5])


def test_text_flag(compile_accuracy):
    compile_accuracy(torch.nn.Linear(4, 4), torch.randn(2, 4), backward="no")
"""


@pytest.mark.parametrize(
    ("args", "ini", "env", "said"),
    [
        (
            ["--compile-accuracy-tol", "abc"],
            "",
            {},
            "--compile-accuracy-tol: 'abc' is not allowed; expected a finite number >= 0",
        ),
        (
            [],
            "compile_accuracy_tol = abc",
            {},
            "ini compile_accuracy_tol: 'abc' is not allowed; expected a finite number >= 0",
        ),
        (
            [],
            "",
            {"PYTEST_TORCHCOMPILE_LEASE_S": "abc"},
            "PYTEST_TORCHCOMPILE_LEASE_S: 'abc' is not allowed; expected a finite number > 0",
        ),
        (
            [],
            "",
            {"PYTEST_TORCHCOMPILE_THREADS": "100000000000000000000"},
            "PYTEST_TORCHCOMPILE_THREADS: '100000000000000000000' is not allowed; "
            "expected an integer >= 0 and <= 1024",
        ),
        (
            ["--compile-accuracy-devices", "4096", "--compile-accuracy-update-baseline"],
            "",
            {},
            "--compile-accuracy-devices: '4096' is not allowed; expected * visible",
        ),
        (
            ["--compile-accuracy-minify-timeout", "nan"],
            "",
            {},
            "--compile-accuracy-minify-timeout: 'nan' is not allowed; "
            "expected a finite number > 0 and <= 86400",
        ),
        (
            ["--compile-accuracy-devices=-1"],
            "",
            {},
            "--compile-accuracy-devices: '-1' is not allowed; "
            "expected CUDA device indices, like '0,2'",
        ),
        (
            ["--compile-accuracy-scope", "bogus"],
            "",
            {},
            "--compile-accuracy-scope: 'bogus' is not allowed; expected one of 'all', 'marked'",
        ),
        (
            ["--compile-accuracy-mode", "max-autotun"],
            "",
            {},
            "--compile-accuracy-mode: 'max-autotun' is not allowed; expected a torch.compile "
            "mode this torch knows: *max-autotune*",
        ),
        (
            ["--compile-accuracy-backend", "inductr", "--compile-accuracy-update-baseline"],
            "",
            {},
            "--compile-accuracy-backend: 'inductr' is not allowed; expected a torch.compile "
            "backend this torch knows (*); close: inductor",
        ),
    ],
    ids=[
        "tol",
        "ini-tol",
        "lease",
        "threads",
        "devices-not-visible",
        "minify-timeout",
        "devices",
        "scope",
        "mode",
        "backend",
    ],
)
def test_a_setting_it_does_not_take_stops_the_run_with_one_line(
    pytester: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
    args: list[str],
    ini: str,
    env: dict[str, str],
    said: str,
) -> None:
    pytester.makepyfile(test_model=SUITE)
    if ini:
        pytester.makeini(f"[pytest]\n{ini}\n")
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    baseline = pytester.path / "baseline.txt"
    result = pytester.runpytest(
        "--compile-accuracy", f"--compile-accuracy-baseline={baseline}", *args
    )
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"ERROR: {said}"])
    output = result.stdout.str() + result.stderr.str()
    assert "Traceback" not in output and "INTERNALERROR" not in output
    assert not baseline.exists()
    assert not (pytester.path / ".compile-accuracy").exists()


def test_a_lease_of_zero_stops_an_xdist_run(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.makepyfile(test_model=SUITE)
    monkeypatch.setenv("PYTEST_TORCHCOMPILE_LEASE_S", "0")
    # A process of its own: xdist's workers (they are never started here).
    result = pytester.runpytest_subprocess("--compile-accuracy", "-n", "2")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["ERROR: PYTEST_TORCHCOMPILE_LEASE_S: '0' is not allowed; expected a finite number > 0"]
    )


def test_a_keyword_it_does_not_take_fails_its_test_with_one_line(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(test_model=TORCH_SETTINGS)
    result = pytester.runpytest("--compile-accuracy", "-rf")
    result.assert_outcomes(failed=10)
    result.stdout.fnmatch_lines(
        [
            "FAILED test_model.py::test_negative_tol - "
            "Failed: @pytest.mark.inductor_repro(tol=...): -1 is not allowed; *",
            "FAILED test_model.py::test_text_tol - "
            "Failed: @pytest.mark.inductor_repro(tol=...): 'abc' is not allowed; *",
            "FAILED test_model.py::test_nan_tol - "
            "Failed: @pytest.mark.inductor_repro(tol=...): nan is not allowed; *",
            "FAILED test_model.py::test_mode_typo - "
            "Failed: @pytest.mark.inductor_repro(mode=...): 'max-autotun' is not allowed; *",
            "FAILED test_model.py::test_negative_steps - "
            "pytest.UsageError: compile_accuracy(steps=...): -1 is not allowed; *",
            "FAILED test_model.py::test_config_typo - "
            "Failed: @pytest.mark.inductor_repro(inductor_config=...): 'no.such.key' is not "
            "allowed; expected a dotted name in this torch's Inductor config",
            "FAILED test_model.py::test_bad_pattern - "
            "Failed: @pytest.mark.inductor_repro(check_str=...): '(' is not allowed; *",
            "FAILED test_model.py::test_huge_seed - "
            "pytest.UsageError: compile_accuracy(seed=...): 1180591620717411303424 is not *",
            "FAILED test_model.py::test_sizes_without_arguments - "
            "pytest.UsageError: compile_accuracy(sizes=...): [[]5] is not allowed; *",
            "FAILED test_model.py::test_text_flag - "
            "pytest.UsageError: compile_accuracy(backward=...): 'no' is not allowed; "
            "expected True or False",
        ]
    )
    result.stdout.no_fnmatch_line("*eager_fail*")
    result.stdout.no_fnmatch_line("*fail_compile*")
    result.stdout.no_fnmatch_line("*UnboundLocalError*")
