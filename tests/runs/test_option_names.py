"""Every option under one prefix, the old names as deprecated aliases that still work."""

from __future__ import annotations

import pytest

from pytest_torchcompile.common.options import OPTIONS

SHOW_SETTINGS = """
from pytest_torchcompile.common import options, settings

def test_settings(request):
    base = settings.session_settings(request.config)
    threads = options.option_value(request.config, options.option("compile-accuracy-threads"))
    assert (base.mode, base.minify, base.minify_timeout, threads) == ("reduce-overhead", False, 7.0, 1)
"""

DEPRECATION = "PytestTorchcompileDeprecation:*"


def test_every_option_has_the_compile_accuracy_prefix() -> None:
    assert all(option.name.startswith("compile-accuracy") for option in OPTIONS)
    assert {option.old_name for option in OPTIONS if option.old_name} == {
        "compile-backend",
        "compile-mode",
        "compile-minify",
        "compile-minify-expected",
        "compile-minify-timeout",
        "compile-minify-workers",
        "compile-threads",
        "compile-devices",
    }


def test_new_names_are_silent_under_w_error(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(SHOW_SETTINGS)
    result = pytester.runpytest_subprocess(
        "-W",
        "error",
        "-s",
        "-p",
        "no:cacheprovider",
        "-p",
        "no:benchmark",
        "--compile-accuracy-mode",
        "reduce-overhead",
        "--no-compile-accuracy-minify",
        "--compile-accuracy-minify-timeout",
        "7",
        "--compile-accuracy-threads",
        "1",
    )
    result.assert_outcomes(passed=1)
    assert "deprecated" not in result.stdout.str() + result.stderr.str()


def test_old_names_still_work_and_say_so_once_without_failing_w_error(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(SHOW_SETTINGS)
    pytester.makeini("[pytest]\ncompile_minify_timeout = 7\n")
    # pytest-benchmark, where installed, warns in its pytest_configure when it finds xdist on, and
    # -W error makes that an INTERNALERROR of any run: not the plugin's, so it is kept out.
    result = pytester.runpytest_subprocess(
        "-W",
        "error",
        "-s",
        "-p",
        "no:cacheprovider",
        "-p",
        "no:benchmark",
        "-n",
        "2",
        "--compile-mode",
        "reduce-overhead",
        "--no-compile-minify",
        "--compile-threads",
        "1",
    )
    result.assert_outcomes(passed=1)
    messages = [
        line for line in result.stdout.lines if line.startswith("PytestTorchcompileDeprecation:")
    ]
    assert messages == [
        "PytestTorchcompileDeprecation: --compile-mode is deprecated: use --compile-accuracy-mode "
        "(the old name goes in the next release)",
        "PytestTorchcompileDeprecation: --no-compile-minify is deprecated: use --no-compile-accuracy-minify "
        "(the old name goes in the next release)",
        "PytestTorchcompileDeprecation: ini key compile_minify_timeout is deprecated: use "
        "compile_accuracy_minify_timeout (the old key goes in the next release)",
        "PytestTorchcompileDeprecation: --compile-threads is deprecated: use --compile-accuracy-threads "
        "(the old name goes in the next release)",
    ]


def test_the_new_name_wins_over_the_old(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(SHOW_SETTINGS)
    pytester.makeini(
        "[pytest]\ncompile_mode = max-autotune\ncompile_accuracy_mode = reduce-overhead\n"
        "compile_accuracy_minify_timeout = 7\n"
    )
    result = pytester.runpytest_subprocess(
        "-p",
        "no:cacheprovider",
        "--compile-minify",
        "--no-compile-accuracy-minify",
        "--compile-accuracy-threads",
        "1",
    )
    result.assert_outcomes(passed=1)


def test_old_names_are_hidden_from_help(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest_subprocess("--help")
    result.stdout.fnmatch_lines(["*--compile-accuracy-mode*"])
    assert "--compile-mode" not in result.stdout.str()
