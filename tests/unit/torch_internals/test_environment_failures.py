"""Which errors of a compile are the environment's (file system, C++ compiler), not Inductor's."""

from __future__ import annotations

import errno
import os

import pytest

from pytest_torchcompile.torch_internals.environment import environment_failure


def raised_from(inner: BaseException) -> BaseException:
    """``inner`` as Inductor hands it on: wrapped in an error of its own."""
    try:
        try:
            raise inner
        except BaseException as error:
            raise RuntimeError(f"InductorError: {type(error).__name__}") from error
    except RuntimeError as outer:
        return outer


class InvalidCxxCompiler(RuntimeError):
    """Named as torch._inductor.exc's."""


@pytest.mark.parametrize("inner", [
    PermissionError(errno.EACCES, "Permission denied", "/cache/rocache/73"),
    OSError(errno.ENOSPC, os.strerror(errno.ENOSPC)),
    OSError(errno.EROFS, os.strerror(errno.EROFS)),
    InvalidCxxCompiler("No working C++ compiler found"),
])
def test_the_environments_errors_are_found_behind_inductors(inner: BaseException) -> None:
    assert environment_failure(raised_from(inner)) is inner


@pytest.mark.parametrize("inner", [
    RuntimeError("C++ compile error: 'x' was not declared"),
    FileNotFoundError(errno.ENOENT, "No such file or directory", "kernel.so"),
    None,
])
def test_the_compilers_errors_are_its_own(inner: BaseException | None) -> None:
    assert environment_failure(None if inner is None else raised_from(inner)) is None
