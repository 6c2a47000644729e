"""What the command line tool's verbs share in taking their arguments: argument types that take
what the plugin's options take, and the usage error a verb raises (said on stderr, exit status
2). Torch-free: the tool's torch-free verbs start without torch."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from pytest_torchcompile.common.allowed import Allowed, NotAllowed, Number
from pytest_torchcompile.common.options import option, setup_modules


class UsageError(Exception):
    """What the command was given cannot be used: said on stderr, exit status 2."""


def taking(allowed: Allowed) -> Callable[[str], Any]:
    """An argument type that takes what ``allowed`` takes, as the plugin's options do; for
    anything else argparse says in one line what it takes (exit status 2)."""

    def argument(text: str) -> Any:
        try:
            return allowed(text)
        except NotAllowed:
            raise argparse.ArgumentTypeError(
                f"{text!r} is not allowed; expected {allowed.describe}"
            ) from None

    return argument


DURATION = taking(Number(above=True))
"""A time limit or budget, in seconds or minutes: a finite number above 0."""
MINIFY_TIMEOUT = taking(option("compile-accuracy-minify-timeout").allowed)
"""The time budget for minifying one case, as the plugin's option takes it."""


def directory(text: str) -> Path:
    """A directory that exists."""
    if not Path(text).is_dir():
        raise argparse.ArgumentTypeError(f"{text!r} is not a directory")
    return Path(text)


def directory_to_write(text: str) -> Path:
    """A directory that exists or can be made: not a file."""
    path = Path(text)
    if path.exists() and not path.is_dir():
        raise argparse.ArgumentTypeError(f"{text!r} is a file, not a directory")
    return path


def setup_checked() -> None:
    """A usage error where ``PYTEST_TORCHCOMPILE_SETUP`` names a module or file not there, before
    a judging process fails to start on it."""
    try:
        setup_modules()
    except pytest.UsageError as error:
        raise UsageError(str(error)) from None
