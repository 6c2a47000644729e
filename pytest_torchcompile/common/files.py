"""Files that several processes write: replaced atomically, and locked per case directory.

Every file the plugin writes goes through :func:`atomic_write`. Given the directory a file must
stay in (``within``), it writes only through real directories below it: a symbolic link there
is refused, never followed, and a link at the file itself is replaced, its target left alone.

Without ``within`` the path is one the user named (a report, the baseline): a link there is
followed and stays a link, a device or a pipe is written through (never replaced by a regular
file), and what cannot take the file (a directory, a socket, a read-only file) is refused with
:class:`RefusedPath` before anything is written; :func:`refusal` tells it ahead of the run.

A file the user names for the plugin to read (a baseline, a shard's report) is read by
:func:`read_bounded`: a regular file of a sane size, never a device or a pipe that may not end.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import re
import shutil
import socket
import stat
import sys
import tempfile
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path

import filelock

from pytest_torchcompile.common.processes import own_start, pid_alive

REPRO_NAME, MINIFIED_NAME, BUG_REPORT_NAME = "repro.py", "minified.py", "bug_report.md"
KERNEL_NAME = "minified_kernel"
"""The files of a case directory: its repro, its minified repro, the bug report, and the kernel
the minified graph compiles to (this name and the kernel's suffix, ``.cpp`` or ``.py``)."""


class UnsafePath(OSError):
    """A path the plugin does not write through: a symbolic link, or a file where a directory
    belongs, between the directory a file must stay in and the file."""


class RefusedPath(OSError):
    """A path the user named that cannot take the file: its message says why, in a few words
    that leave the path to the caller (``it is a directory``)."""


class NotARegularFile(Exception):
    """A path named for reading is a device, a pipe or a directory (which may never end)."""


class TooLarge(Exception):
    """A file named for reading is larger than what it holds can be."""


def read_bounded(path: Path, limit: int, head: bool = False) -> bytes:
    """The bytes of the regular file at ``path``, of at most ``limit`` bytes; raises
    :class:`NotARegularFile` or :class:`TooLarge` (:class:`OSError` where it cannot be opened).
    With ``head``, a longer file's first ``limit`` bytes, and the rest is never read."""
    # Opened without blocking: a pipe would wait for a writer before it could be looked at.
    handle = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY)
    if not stat.S_ISREG(os.fstat(handle).st_mode):
        os.close(handle)
        raise NotARegularFile(path)
    with os.fdopen(handle, "rb") as stream:
        # Read one byte past the limit: a file's size can change, or be untold, as it is read.
        data = stream.read(limit if head else limit + 1)
    if len(data) > limit:
        raise TooLarge(path)
    return data


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


def unwritable_directory(directory: Path) -> str | None:
    """Why files could not be written in ``directory``, found without making it: where it is
    missing, in the nearest directory above it, where it would be made; or None. Nothing is left
    behind."""
    existing = directory
    while not os.path.lexists(existing) and existing.parent != existing:
        existing = existing.parent
    if not existing.is_dir():
        return (
            "it is a file, not a directory"
            if existing == directory
            else f"{existing} is a file, not a directory"
        )
    try:
        with tempfile.TemporaryFile(dir=existing):
            pass
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
            raise UnsafePath(
                f"{current} is a symbolic link (to {os.readlink(current)}): nothing is written "
                "through it; remove it"
            )
        if not current.is_dir():
            raise UnsafePath(f"{current} is not a directory; remove it")


def refusal(path: Path) -> str | None:
    """Why :func:`atomic_write` without ``within`` refuses ``path`` (followed through links), or
    None: a directory, a socket or a block device is no file to write; a read-only file is the
    user's word that it is not to change (a rename would replace it whatever its mode)."""
    try:
        found = path.stat()
    except FileNotFoundError:
        return None
    except OSError as error:
        return error.strerror or str(error)
    mode = found.st_mode
    if stat.S_ISDIR(mode):
        return "it is a directory"
    if stat.S_ISSOCK(mode) or stat.S_ISBLK(mode):
        return f"it is a {'socket' if stat.S_ISSOCK(mode) else 'block device'}, not a file"
    if stat.S_ISREG(mode) and not mode & 0o222:
        return (
            f"it is read-only (mode {stat.S_IMODE(mode):04o}), so it is left as it is; "
            "make it writable to have it written"
        )
    return None


def clashing_paths(
    inputs: Sequence[tuple[str, str | os.PathLike[str] | None]],
    outputs: Sequence[tuple[str, str | os.PathLike[str] | None]],
) -> str | None:
    """Why the paths the settings name cannot all be used, or None: an output that is an input,
    or two outputs at one place (real paths compared, links followed), in one line naming both
    settings. A setting named among both (the baseline an update rewrites) is itself; a device
    or a pipe, written through and never replaced, may take several outputs."""
    seen: dict[str, list[tuple[str, bool]]] = {}
    named = [(setting, path, False) for setting, path in inputs]
    named += [(setting, path, True) for setting, path in outputs]
    for setting, path, output in named:
        if path is None:
            continue
        real = os.path.realpath(path)
        if _written_through(real):
            continue
        clash = _clash(seen.get(real, []), setting, output)
        if clash is not None:
            other, what = clash
            return f"{other} and {setting} name one path, for {what}: {path}"
        seen.setdefault(real, []).append((setting, output))
    return None


def _written_through(real: str) -> bool:
    """Whether what is at ``real`` is a device or a pipe; a path that cannot be looked at is
    taken for a file."""
    try:
        mode = os.stat(real).st_mode
    except OSError:
        return False
    return not (stat.S_ISREG(mode) or stat.S_ISDIR(mode))


def _clash(earlier: list[tuple[str, bool]], setting: str, output: bool) -> tuple[str, str] | None:
    """The first of the ``earlier`` settings at a path that ``setting`` (an output where
    ``output``) clashes with, and for what; None where none does."""
    for other, other_output in earlier:
        if other != setting and (output or other_output):
            what = "an input and an output" if not (output and other_output) else "two outputs"
            return other, what
    return None


_OWN_DESCRIPTOR = re.compile(r"/(?:dev|proc/self)/fd/(\d+)")


def _own_descriptor(path: Path) -> int | None:
    """The descriptor of this process that ``path`` names (``/dev/stdout``, ``/dev/fd/1``,
    ``/proc/self/fd/1``), or None."""
    name = os.path.abspath(path)
    with contextlib.suppress(OSError):
        if os.path.islink(name) and not _OWN_DESCRIPTOR.fullmatch(name):
            name = os.readlink(name)  # /dev/stdout -> /proc/self/fd/1
    match = _OWN_DESCRIPTOR.fullmatch(name)
    return int(match.group(1)) if match else None


def _write_through(path: Path, data: bytes) -> None:
    """Write ``data`` into the device, pipe or stream at ``path``, as a shell's ``>>`` would:
    appended. A descriptor of this process is written through itself, at its own offset, after
    what Python holds for it: a file it was redirected to keeps what was written before and
    after."""
    descriptor = _own_descriptor(path)
    if descriptor is not None:
        sys.stdout.flush()
        sys.stderr.flush()
        with os.fdopen(descriptor, "wb", closefd=False) as stream:
            stream.write(data)
        return
    try:
        # Not blocking on a pipe no process reads: that is a refusal, not a hang.
        handle = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_NONBLOCK | os.O_NOCTTY)
    except OSError as error:
        if error.errno == errno.ENXIO:
            raise RefusedPath("it is a pipe that no process reads") from None
        raise
    os.set_blocking(handle, True)
    with os.fdopen(handle, "wb") as stream:
        stream.write(data)


def atomic_write(path: str | os.PathLike[str], data: bytes, within: Path | None = None) -> None:
    """Replace ``path`` with ``data`` so that a crash or a concurrent reader never sees half a file.

    With ``within``, a symbolic link (or anything but a regular file) at ``path`` is replaced by
    the file (a link's target is not written), and the directories from there down must be real
    ones (see :func:`make_directory`). Without it, ``path`` is one the user named: see the module's
    docstring."""
    path = Path(path)
    if within is None:
        refused = refusal(path)
        if refused is not None:
            raise RefusedPath(refused)
        with contextlib.suppress(FileNotFoundError):
            # A descriptor of this process (/dev/stdout, /proc/self/fd/1) is a stream even where
            # it leads to a regular file: replacing that file would take the rest of the
            # stream's output with it. Another regular file under /dev (/dev/shm) is a file.
            if not stat.S_ISREG(path.stat().st_mode) or _own_descriptor(path) is not None:
                _write_through(path, data)
                return
        path = Path(os.path.realpath(path))
    make_directory(path.parent, within)
    # mkstemp creates the file 0600; keep the mode of the file being replaced (or a usual 0644)
    # so that repros, a committed baseline or a CI artifact stay readable.
    try:
        existing = path.lstat()
    except FileNotFoundError:
        mode = 0o644
    else:
        mode = stat.S_IMODE(existing.st_mode) if stat.S_ISREG(existing.st_mode) else 0o644
    remove_stale_temporaries(path.parent, path.name, ".tmp")
    handle, temporary = tempfile.mkstemp(
        dir=path.parent, prefix=temporary_prefix(path.name), suffix=".tmp"
    )
    try:
        with os.fdopen(handle, "wb") as stream:
            stream.write(data)
        os.chmod(temporary, mode)
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)
        raise


def temporary_prefix(name: str) -> str:
    """How the name of a temporary file or directory made on the way to ``name`` starts: with
    the writer's host, process id and start, so that a later write of ``name`` tells one that a
    writer killed before its rename left behind (:func:`remove_stale_temporaries`)."""
    return f".{name}.{_host()}-{os.getpid()}-{own_start() or 0}."


def remove_stale_temporaries(directory: Path, name: str, suffix: str) -> None:
    """Remove what writers of ``name`` on this host that are no longer alive left in
    ``directory`` (``temporary_prefix(name)...suffix``); a link among them is removed itself,
    never followed. Another live writer's temporaries, or another host's, are left alone."""
    made_by = re.compile(
        re.escape(f".{name}.") + r"([0-9a-f]{8})-(\d+)-(\d+)\.\w+" + re.escape(suffix)
    )
    try:
        entries = os.listdir(directory)
    except OSError:
        return
    for entry in entries:
        match = made_by.fullmatch(entry)
        if match is None or match[1] != _host():
            continue
        if pid_alive(int(match[2]), None if match[3] == "0" else match[3]):
            continue
        stale = directory / entry
        if stale.is_dir() and not stale.is_symlink():
            shutil.rmtree(stale, ignore_errors=True)
        else:
            with contextlib.suppress(OSError):
                stale.unlink()


def _host() -> str:
    return hashlib.sha256(socket.gethostname().encode()).hexdigest()[:8]


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
    remove_stale_temporaries(target.parent, target.name, ".old")
    aside = target.with_name(f"{temporary_prefix(target.name)}{uuid.uuid4().hex[:8]}.old")
    os.rename(target, aside)
    os.rename(new, target)
    if aside.is_symlink() or not aside.is_dir():
        aside.unlink()
    else:
        shutil.rmtree(aside, ignore_errors=True)
