"""The plugin's own work inside a test's call, kept beside the test's."""

from __future__ import annotations

import contextlib
import logging
import threading
import warnings
from collections.abc import Iterator

from pytest_torchcompile.judging.seeding import generators_kept
from pytest_torchcompile.torch_internals.interception import not_intercepted
from pytest_torchcompile.torch_internals.observable import unobserved
from pytest_torchcompile.torch_internals.threads import compile_workers


@contextlib.contextmanager
def aside() -> Iterator[None]:
    """Run the block as the plugin's work, not the test's: what it compiles is not judged as the
    test's compiles are and leaves no trace in what a suite reads of the compiler (its counters,
    compile ids, metrics), what it draws leaves torch's generators as they were, and what it warns
    of or logs does not reach the test's warnings (where ``-W error`` would turn it into the test's
    failure) or its logs (:func:`unlogged`)."""
    with (
        unobserved(),
        generators_kept(),
        not_intercepted(),
        unlogged(),
        warnings.catch_warnings(),
    ):
        warnings.simplefilter("ignore")
        yield


@contextlib.contextmanager
def unlogged() -> Iterator[None]:
    """What this thread logs in the block, and Inductor's compile workers meanwhile (the block's
    compiles, whose C++ builds run there), reaches no handler: pytest's (a test's ``caplog``, the
    "Captured log" section of its report, live logging, the log file), torch's own on stderr or
    the suite's. A plain run logs none of it: not the model's records of the check's runs of it
    (eager twice, fp64, Dynamo's tracing, ...), nor Dynamo's warnings of graph breaks in the
    plugin's compiles, nor ``filelock``'s DEBUG records of the locks the plugin's work takes
    (the repro directory's, the Inductor caches'). Records of the test's other threads pass.

    Handlers, not loggers, filter: a logger's filter sees only the records logged through it,
    not those of its children that propagate to its handlers."""
    thread = threading.get_ident()

    def theirs(record: logging.LogRecord) -> bool:
        return record.thread != thread and record.thread not in compile_workers()

    handlers = _handlers()
    for handler in handlers:
        handler.addFilter(theirs)
    try:
        yield
    finally:
        for handler in handlers:
            handler.removeFilter(theirs)


def _handlers() -> list[logging.Handler]:
    """Every handler of every logger now, and the last resort where a record finds none."""
    loggers = [logging.getLogger()] + [
        logger
        for logger in list(logging.Logger.manager.loggerDict.values())
        if isinstance(logger, logging.Logger)
    ]
    found = {id(handler): handler for logger in loggers for handler in logger.handlers}
    if logging.lastResort is not None:
        found.setdefault(id(logging.lastResort), logging.lastResort)
    return list(found.values())
