"""Files that several processes write: replaced atomically, and locked per case directory."""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path

import filelock


@contextlib.contextmanager
def locked(directory: Path) -> Iterator[None]:
    """Serialise writers of one case directory across processes."""
    directory.parent.mkdir(parents=True, exist_ok=True)
    with filelock.FileLock(str(directory) + ".lock"):
        yield


def atomic_write(path: str | os.PathLike[str], data: bytes) -> None:
    """Replace ``path`` with ``data`` so that a crash or a concurrent reader never sees half a file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    # mkstemp creates the file 0600; keep the mode of the file being replaced (or a usual 0644)
    # so that repros, a committed baseline or a CI artifact stay readable.
    mode = stat.S_IMODE(path.stat().st_mode) if path.exists() else 0o644
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
