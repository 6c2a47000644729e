"""The plugin's own work inside a test's call leaves the test's warnings and logs as they were."""

from __future__ import annotations

import logging
import threading
import warnings
from pathlib import Path

import filelock
import pytest
import torch

from pytest_torchcompile.checking.aside import aside
from pytest_torchcompile.torch_internals.compiling import reset


def reads_data(x: torch.Tensor) -> torch.Tensor:
    return torch._C._autograd._get_data_attr(x) * 2


def test_what_the_plugins_work_warns_of_does_not_reach_the_test() -> None:
    """Dynamo warns of a C function it cannot trace (a repro's graph judged again in process):
    under ``-W error`` the warning would have failed a test that passes plainly."""
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("error")
        with aside():
            reset()
            try:
                with pytest.raises(Exception, match="skipped"):
                    torch.compile(reads_data, fullgraph=True)(torch.randn(4))
            finally:
                reset()
    assert seen == []


def test_the_tests_own_warnings_still_reach_it() -> None:
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        with aside():
            pass
        warnings.warn("the test's own", UserWarning, stacklevel=1)
    assert [str(warning.message) for warning in seen] == ["the test's own"]


def test_the_locks_of_the_plugins_work_log_nothing_and_other_threads_still_do(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)

    def test_thread() -> None:
        with filelock.FileLock(str(tmp_path / "theirs.lock")):
            pass

    with aside():
        with filelock.FileLock(str(tmp_path / "mine.lock")):
            pass
        thread = threading.Thread(target=test_thread)
        thread.start()
        thread.join()

    locked = {record.getMessage().rsplit("/", 1)[-1] for record in caplog.records}
    assert locked == {"theirs.lock"}
