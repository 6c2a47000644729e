"""Files that several processes write: replaced atomically, and locked per case directory.

Every file the plugin writes goes through :func:`atomic_write`. Given the directory a file must
stay in (``within``), it writes only through real directories below it: a symbolic link there
is refused, never followed, and a link at the file itself is replaced, its target left alone.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import filelock


class UnsafePath(OSError):
    """A path the plugin does not write through: a symbolic link, or a file where a directory
    belongs, between the directory a file must stay in and the file."""


@contextlib.contextmanager
def locked(directory: Path) -> Iterator[None]:
    """Serialise writers of one case directory (or one file) across processes."""
    directory.parent.mkdir(parents=True, exist_ok=True)
    with filelock.FileLock(str(directory) + ".lock"):
        yield


def unusable_directory(directory: Path) -> str | None:
    """Why files cannot be written in ``directory`` (created if missing), or None."""
    try:
        directory.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=directory):
            pass
    except FileExistsError:
        return "it is a file, not a directory"
    except OSError as error:
        return error.strerror or str(error)
    return None


def make_directory(directory: Path, within: Path | None = None) -> None:
    """Create ``directory`` and its parents. With ``within``, each directory from ``within`` down
    to ``directory`` must be a real one: a symbolic link or a file there raises
    :class:`UnsafePath` (``within`` itself may be a link: it is the place the user chose)."""
    if within is None:
        directory.mkdir(parents=True, exist_ok=True)
        return
    within.mkdir(parents=True, exist_ok=True)
    try:
        parts = directory.relative_to(within).parts
    except ValueError:
        raise UnsafePath(f"{directory} is outside {within}") from None
    current = within
    for part in parts:
        current = current / part
        if part == "..":
            raise UnsafePath(f"{directory} leaves {within}")
        with contextlib.suppress(FileExistsError):
            current.mkdir()
        if current.is_symlink():
            raise UnsafePath(f"{current} is a symbolic link (to {os.readlink(current)}): nothing is written "
                             "through it; remove it")
        if not current.is_dir():
            raise UnsafePath(f"{current} is not a directory; remove it")


def atomic_write(path: str | os.PathLike[str], data: bytes, within: Path | None = None) -> None:
    """Replace ``path`` with ``data`` so that a crash or a concurrent reader never sees half a file.

    A symbolic link at ``path`` is replaced by the file (its target is not written); with
    ``within``, the directories from there down must be real ones (see :func:`make_directory`)."""
    path = Path(path)
    make_directory(path.parent, within)
    # mkstemp creates the file 0600; keep the mode of the file being replaced (or a usual 0644)
    # so that repros, a committed baseline or a CI artifact stay readable.
    try:
        existing = path.lstat()
    except FileNotFoundError:
        mode = 0o644
    else:
        mode = stat.S_IMODE(existing.st_mode) if stat.S_ISREG(existing.st_mode) else 0o644
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "wb") as stream:
            stream.write(data)
        os.chmod(temporary, mode)
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)
        raise


def replace_directory(new: Path, target: Path) -> None:
    """Put the complete directory ``new`` at ``target`` (both in one directory). What was there
    (an earlier directory, a file, a symbolic link) is moved aside first and removed only once
    ``new`` is in place; a link is removed itself, never followed."""
    try:
        os.rename(new, target)  # nothing there, or an empty directory
        return
    except OSError:
        if not os.path.lexists(target):
            raise
    aside = target.with_name(f".{target.name}.{uuid.uuid4().hex[:8]}.old")
    os.rename(target, aside)
    os.rename(new, target)
    if aside.is_symlink() or not aside.is_dir():
        aside.unlink()
    else:
        shutil.rmtree(aside, ignore_errors=True)
