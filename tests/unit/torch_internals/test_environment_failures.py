"""Which errors of a compile are the environment's (file system, C++ compiler), not Inductor's."""

from __future__ import annotations

import errno
import os
import tempfile
from pathlib import Path

import pytest

from pytest_torchcompile.common.files import unwritable_directory
from pytest_torchcompile.torch_internals.environment import environment_failure, inductor_cache


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


@pytest.mark.parametrize(
    "inner",
    [
        PermissionError(errno.EACCES, "Permission denied", "/cache/rocache/73"),
        OSError(errno.ENOSPC, os.strerror(errno.ENOSPC)),
        OSError(errno.EROFS, os.strerror(errno.EROFS)),
        InvalidCxxCompiler("No working C++ compiler found"),
    ],
)
def test_the_environments_errors_are_found_behind_inductors(inner: BaseException) -> None:
    assert environment_failure(raised_from(inner)) is inner


@pytest.mark.parametrize(
    "inner",
    [
        RuntimeError("C++ compile error: 'x' was not declared"),
        FileNotFoundError(errno.ENOENT, "No such file or directory", "kernel.so"),
        None,
    ],
)
def test_the_compilers_errors_are_its_own(inner: BaseException | None) -> None:
    assert environment_failure(None if inner is None else raised_from(inner)) is None


def test_the_default_inductor_cache_is_the_one_inductor_makes(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from torch._inductor.runtime.cache_dir_utils import default_cache_dir

    monkeypatch.delenv("TORCHINDUCTOR_CACHE_DIR", raising=False)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    assert inductor_cache() == (Path(default_cache_dir()), False)
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", "relative/cache")
    assert inductor_cache() == (Path.cwd() / "relative" / "cache", True)


def test_a_directory_not_made_yet_is_checked_where_it_would_be_made(tmp_path: Path) -> None:
    assert unwritable_directory(tmp_path / "torchinductor_user" / "deeper") is None
    assert list(tmp_path.iterdir()) == []  # nothing made, nothing left
    (tmp_path / "torchinductor_user").write_text("")
    assert unwritable_directory(tmp_path / "torchinductor_user") == "it is a file, not a directory"
    assert unwritable_directory(tmp_path / "torchinductor_user" / "deeper") == (
        f"{tmp_path / 'torchinductor_user'} is a file, not a directory"
    )
