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


@contextlib.contextmanager
def aside() -> Iterator[None]:
    """Run the block as the plugin's work, not the test's: what it compiles is not judged as the
    test's compiles are and leaves no trace in what a suite reads of the compiler (its counters,
    compile ids, metrics), what it draws leaves torch's generators as they were, and what it warns
    of does not reach the test's warnings (where ``-W error`` would turn it into the test's
    failure)."""
    with (
        unobserved(),
        generators_kept(),
        not_intercepted(),
        locks_unlogged(),
        warnings.catch_warnings(),
    ):
        warnings.simplefilter("ignore")
        yield


@contextlib.contextmanager
def locks_unlogged() -> Iterator[None]:
    """The file locks this thread takes in the block (the repro directory's, the Inductor caches'
    of a compile aside) log nothing: ``filelock`` logs every acquire and release at DEBUG, which a
    test's ``caplog`` would hold though the test took no lock. Records of other threads pass."""
    logger = logging.getLogger("filelock")
    thread = threading.get_ident()

    def theirs(record: logging.LogRecord) -> bool:
        return record.thread != thread

    logger.addFilter(theirs)
    try:
        yield
    finally:
        logger.removeFilter(theirs)
