"""The run's CPU budget in whole runs under xdist: workers share the machine's CPUs with their
compile workers and children; a user's override wins; a bad thread count is a usage error."""

from __future__ import annotations

import os

import pytest

from pytest_torchcompile.common import budget, options

SEEN = """
import os, subprocess, sys, torch
import torch._inductor.config as inductor_config

EXPECTED = {expected}


def expected():
    if EXPECTED is not None:
        return EXPECTED
    return max(1, len(os.sched_getaffinity(0)) // int(os.environ["PYTEST_XDIST_WORKER_COUNT"]))


def test_threads_seen(compile_accuracy):
    threads = expected()
    assert torch.get_num_threads() == threads
    assert inductor_config.compile_threads == threads
    child = subprocess.run(
        [sys.executable, "-c", "import torch, torch._inductor.config as c; print(torch.get_num_threads(), c.compile_threads)"],
        capture_output=True, text=True, check=True)
    assert child.stdout.split() == [str(threads), str(threads)]


def test_second(compile_accuracy):
    assert torch.get_num_threads() == expected()
"""


def _run(pytester: pytest.Pytester, expected: int | None, *flags: str) -> pytest.RunResult:
    pytester.makepyfile(test_seen=SEEN.format(expected=expected))
    return pytester.runpytest_subprocess(
        "-n", "2", "--compile-accuracy", "-p", "no:cacheprovider", *flags
    )


@pytest.mark.slow
@pytest.mark.skipif(not hasattr(os, "sched_getaffinity"), reason="needs os.sched_getaffinity")
def test_xdist_workers_share_the_cpus_with_their_compile_workers_and_children(
    pytester: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in (options.THREADS_ENV, *budget.CHILD_ENV):
        monkeypatch.delenv(name, raising=False)
    _run(pytester, None).assert_outcomes(passed=2)


@pytest.mark.slow
def test_the_command_line_overrides_the_environment_and_the_share(
    pytester: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # 2: within a 2-core machine (OpenMP caps a child's threads at the cores), not its share of 1
    monkeypatch.setenv(options.THREADS_ENV, "5")
    _run(pytester, 2, "--compile-accuracy-threads", "2").assert_outcomes(passed=2)


def test_a_bad_thread_count_is_a_usage_error(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("def test_nothing():\n    pass\n")
    result = pytester.runpytest_subprocess(
        "-n", "2", "--compile-accuracy", "--compile-accuracy-threads", "many"
    )
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["*--compile-accuracy-threads: 'many' is not allowed; expected an integer >= 0 and <= 1024"]
    )
