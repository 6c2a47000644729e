"""Processes that act at once, for the tests of files several processes write together."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any


def run_together(
    context: Any,
    target: Callable[..., None],
    each: Sequence[tuple[Any, ...]],
    timeout_s: float = 120.0,
) -> list[int | None]:
    """Run ``target(*args, barrier)`` for each ``args`` of ``each``, in a process of its own
    started from the multiprocessing ``context``; all share ``barrier``, for the target to wait
    at (to start its work with the others, or to live until all have done theirs). Returns their
    exit codes, None for one still running after ``timeout_s`` (then killed)."""
    barrier = context.Barrier(len(each))
    processes = [context.Process(target=target, args=(*args, barrier)) for args in each]
    for process in processes:
        process.start()
    for process in processes:
        process.join(timeout_s)
    codes = [process.exitcode for process in processes]
    for process in processes:
        if process.is_alive():
            process.kill()
            process.join()
    return codes
