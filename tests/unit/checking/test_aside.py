"""The plugin's own work inside a test's call leaves the test's warnings and logs as they were:
what it logs reaches no handler."""

from __future__ import annotations

import concurrent.futures
import logging
import threading
import warnings
from collections.abc import Iterator
from pathlib import Path

import filelock
import pytest
import torch

from pytest_torchcompile.checking import aside as aside_module
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


class Held(logging.Handler):
    """A handler that holds what reaches it."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


@pytest.fixture
def own_logger() -> Iterator[tuple[logging.Logger, Held]]:
    """A logger that keeps its records to its own handler, as torch's loggers do."""
    logger, held = logging.getLogger("tests.aside.own"), Held()
    logger.addHandler(held)
    logger.propagate = False
    logger.setLevel(logging.DEBUG)
    try:
        yield logger, held
    finally:
        logger.removeHandler(held)
        logger.propagate = True
        logger.setLevel(logging.NOTSET)


def test_what_the_plugins_work_logs_reaches_no_handler_and_the_tests_own_records_do(
    caplog: pytest.LogCaptureFixture, own_logger: tuple[logging.Logger, Held]
) -> None:
    """The model's records of the check's runs, Dynamo's warnings of the plugin's compiles: a
    plain run logs none of them, so neither pytest's handlers (``caplog``, the report's captured
    log; pytest puts them on a logger that does not propagate too) nor a logger's own handler
    (torch's on stderr) sees them."""
    caplog.set_level(logging.DEBUG)
    logger, held = own_logger
    logging.getLogger("mymodel").warning("the test's, before")
    with aside():
        logging.getLogger("mymodel").warning("a check's run")
        logging.getLogger("mymodel.layer").debug("a check's run, deeper")
        logger.warning("a check's run, to its own handler")
    logging.getLogger("mymodel").warning("the test's, after")
    logger.warning("the test's, to its own handler")

    assert [record.getMessage() for record in caplog.records] == [
        "the test's, before",
        "the test's, after",
        "the test's, to its own handler",
    ]
    assert held.messages == ["the test's, to its own handler"]


def test_handlers_take_every_record_again_after_an_aside_that_raised(
    caplog: pytest.LogCaptureFixture,
) -> None:
    handlers = [*logging.getLogger().handlers]
    filters = {id(handler): list(handler.filters) for handler in handlers}
    with pytest.raises(RuntimeError, match="the check's own"), aside():
        raise RuntimeError("the check's own")
    logging.getLogger("mymodel").warning("the test's")

    assert [record.getMessage() for record in caplog.records] == ["the test's"]
    assert {id(handler): list(handler.filters) for handler in handlers} == filters


def test_what_inductors_compile_workers_log_in_the_block_reaches_no_handler(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The C++ builds of the plugin's compiles run on Inductor's compile workers, which take the
    cache's file locks there: their ``filelock`` DEBUG records are the plugin's too. A thread
    of the test's own still logs."""
    caplog.set_level(logging.DEBUG)
    worker = concurrent.futures.ThreadPoolExecutor(1)
    worker.submit(bool).result()
    [worker_thread] = list(worker._threads)
    monkeypatch.setattr(aside_module, "compile_workers", lambda: {worker_thread.ident})

    def log(message: str) -> None:
        logging.getLogger("filelock").debug(message)

    try:
        with aside():
            worker.submit(log, "a compile worker's lock").result()
            thread = threading.Thread(target=log, args=("the test's thread's lock",))
            thread.start()
            thread.join()
    finally:
        worker.shutdown()

    assert [record.getMessage() for record in caplog.records] == ["the test's thread's lock"]
