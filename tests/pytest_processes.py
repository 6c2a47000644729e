"""Which processes a test starts are pytest runs: unit tests run in this process, and a whole run
in a process of its own belongs in tests/runs (tests/unit/conftest.py fails a unit test that
starts one)."""

from __future__ import annotations

import itertools
import os
from collections.abc import Sequence


def starts_pytest(command: object) -> bool:
    """Whether ``command`` (a ``subprocess.Popen`` argument: a string for the shell, or an argument
    list) runs pytest: ``python -m pytest`` (``-mpytest``, as ``pytester.runpytest_subprocess``
    writes it) or a ``pytest`` / ``py.test`` executable. Never raises: an audit hook that raises
    stops the process from starting."""
    if isinstance(command, (str, bytes)):
        words = os.fsdecode(command).split()
    elif isinstance(command, os.PathLike):
        words = [os.fspath(command)]
    elif isinstance(command, Sequence):
        words = [
            os.fsdecode(word) if isinstance(word, (bytes, os.PathLike)) else str(word)
            for word in command
        ]
    else:
        return False
    if words and os.path.basename(words[0]) in ("pytest", "py.test"):
        return True
    return "-mpytest" in words or ("-m", "pytest") in itertools.pairwise(words)


class PytestProcesses:
    """An audit hook (``sys.addaudithook``) that records the pytest runs started through
    ``subprocess`` (its ``subprocess.Popen`` event, which every way of starting one raises) while
    ``watching`` is set."""

    def __init__(self) -> None:
        self.watching = False
        self.started: list[str] = []

    def __call__(self, event: str, args: tuple[object, ...]) -> None:
        if self.watching and event == "subprocess.Popen":
            command = args[1]
            if starts_pytest(command):
                self.started.append(command if isinstance(command, str) else repr(command))
