"""Write repro files: a case rendered (``rendering``) into a file, its tensors beside it, atomically
and under a lock; a run's cases each into a directory it claims.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import re
import shutil
import socket
import stat
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Any

import filelock

from pytest_torchcompile.common.files import (
    REPRO_NAME,
    atomic_write,
    locked,
    remove_stale_temporaries,
    replace_directory,
    temporary_prefix,
)
from pytest_torchcompile.common.processes import own_start, pid_alive
from pytest_torchcompile.judging.case import ReproCase
from pytest_torchcompile.judging.judge import error_signature
from pytest_torchcompile.repros.compact import (
    compact_disagreement,
    compact_obstacle,
)
from pytest_torchcompile.repros.loading import load_repro
from pytest_torchcompile.repros.rendering import render_repro

TENSOR_DIR = "tensors"


def slugify(nodeid: str, limit: int = 80) -> str:
    """A directory name for a test id; long or colliding ids keep a hash suffix to stay unique."""
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "_", nodeid.replace("::", "__")).strip("_.") or "case"
    if len(slug) > limit:
        digest = hashlib.sha1(nodeid.encode()).hexdigest()[:8]
        slug = f"{slug[: limit - 9]}-{digest}"
    return slug


def write_repro(
    case: ReproCase, path: Path, within: Path | None = None, compact: bool = False
) -> Path:
    """Write ``case`` to ``path`` (and its tensors beside it), atomically and under a lock; with
    ``within``, only through real directories below it (see ``files.atomic_write``); with
    ``compact``, in the compact form (see ``render_repro``)."""
    source, tensors = render_repro(case, compact)
    with locked(path.parent):
        _write_files(path, source, tensors, within)
    return path


def write_minified(case: ReproCase, path: Path, within: Path | None = None) -> Path:
    """Write a minified ``case`` in the compact form where it can be (see ``compact``), else in
    the full form with a note saying why. A compact file is loaded back first: it is kept only
    when its graph and its eager and fp64 runs are the plugin's."""
    reason = compact_obstacle(case)
    if reason is None:
        write_repro(case, path, within, compact=True)
        try:
            reason = compact_disagreement(load_repro(path).module, case)
        except Exception as error:
            reason = f"it does not load: {error_signature(error)}"
        if reason is None:
            return path
    return write_repro(
        replace(case, notes=[*case.notes, f"the full form, not the compact one: {reason}"]),
        path,
        within,
    )


def _write_files(path: Path, source: str, tensors: dict[str, bytes], within: Path | None) -> None:
    for name, data in tensors.items():
        target = path.parent / TENSOR_DIR / f"{name}.pt"
        if not _holds(target, data):
            atomic_write(target, data, within)
    atomic_write(path, source.encode(), within)


def _holds(path: Path, data: bytes) -> bool:
    """Whether ``path`` is a regular file of exactly ``data``: a tensor file named by its content
    is reused only then, not because a stale or planted file has its name."""
    try:
        if not stat.S_ISREG(path.lstat().st_mode) or path.lstat().st_size != len(data):
            return False
        return path.read_bytes() == data
    except OSError:
        return False


def write_case(case: ReproCase, root: Path, slug: str, owner: str) -> Path:
    """Write ``case`` as the ``repro.py`` of a case directory in ``root`` claimed for ``slug``
    (:func:`unique_case_dir`): into a new directory, complete before it takes the place of what
    was there (the directory an earlier run of the test left, or anything planted, a symbolic
    link included, which is removed, never followed)."""
    source, tensors = render_repro(case)
    directory = unique_case_dir(root, slug, owner)
    remove_stale_temporaries(root, directory.name, ".new")
    staging = Path(
        tempfile.mkdtemp(dir=root, prefix=temporary_prefix(directory.name), suffix=".new")
    )
    try:
        os.chmod(staging, 0o755)  # mkdtemp's 0700 would keep the repros from others
        _write_files(staging / REPRO_NAME, source, tensors, staging)
        with locked(directory):
            replace_directory(staging, directory)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return directory / REPRO_NAME


def unique_case_dir(root: Path, slug: str, owner: str) -> Path:
    """``root/slug``, or ``root/slug-2``, ... : the first name that no live process holds.

    ``<name>.claimed`` holds a name for the process that wrote it, as long as that process lives
    and, within it, for the run (``owner``) that claimed it: so several checks of one test, tests
    whose ids make one slug, and concurrent runs in one directory get distinct directories, while
    a rerun of a test takes its directory back."""
    root.mkdir(parents=True, exist_ok=True)
    me = {"owner": owner, "pid": os.getpid(), "start": own_start(), "host": socket.gethostname()}
    with filelock.FileLock(str(root / ".claims.lock")):
        for suffix in itertools.count(1):
            name = slug if suffix == 1 else f"{slug}-{suffix}"
            claim = root / f"{name}.claimed"
            if not _claim_held(claim, me):
                atomic_write(claim, json.dumps(me).encode(), root)
                return root / name
    raise AssertionError("unreachable")


def _claim_held(claim: Path, me: dict[str, Any]) -> bool:
    """Whether ``claim`` holds its name: for another live process, or for this run of this one.
    A claim that cannot be read (an older format, a partial write) holds nothing."""
    try:
        holder = json.loads(claim.read_text()) if stat.S_ISREG(claim.lstat().st_mode) else None
    except (OSError, ValueError):
        return False
    if not isinstance(holder, dict):
        return False
    if holder.get("host") != me["host"]:
        return True  # another machine's process: its liveness cannot be told from here
    if holder.get("pid") == me["pid"] and holder.get("start") == me["start"]:
        return holder.get("owner") == me["owner"]
    return isinstance(holder.get("pid"), int) and pid_alive(holder["pid"], holder.get("start"))
