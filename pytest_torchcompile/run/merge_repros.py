"""The repro directories (``--compile-accuracy-dir``) of a split run's shards, collected as CI
artifacts, merged into one: a case directory per failing check, a case two shards both wrote kept
once (the first given), and said so.

Only what is plainly there is copied: symbolic links are neither followed nor copied (each one
is named), nothing is written outside the target directory, and the target must be new or empty
so that no file already in it is overwritten. The run's own bookkeeping (names starting with
``.``, the case claims and locks beside the case directories) is left behind.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from pathlib import Path


class ReproDirError(Exception):
    """The repro directories cannot be merged as asked; the message is one line."""


def merge_repro_dirs(sources: Sequence[Path], into: Path) -> list[str]:
    """Copy the case directories of ``sources`` into ``into``; lines saying what was kept once,
    left out, and how many cases there are."""
    _check_target(into, sources)
    into.mkdir(parents=True, exist_ok=True)
    lines: list[str] = []
    kept: dict[str, Path] = {}
    for source in sources:
        if source.is_symlink() or not source.is_dir():
            lines.append(f"repros: {source} is not a directory: nothing taken from it")
            continue
        for entry in sorted(os.scandir(source), key=lambda entry: entry.name):
            if entry.name.startswith(".") or entry.is_file(follow_symlinks=False):
                continue
            path = Path(entry.path)
            if not entry.is_dir(follow_symlinks=False):
                lines.append(f"repros: {path} is a symbolic link or not a directory: left out")
                continue
            first = kept.get(entry.name)
            if first is None:
                kept[entry.name] = path
                _copy_tree(path, into / entry.name, lines)
            elif _digest(first) == _digest(path):
                lines.append(
                    f"repros: case {entry.name} is in {first.parent} and {source} with the same "
                    f"files: kept one"
                )
            else:
                lines.append(
                    f"repros: case {entry.name} is in {first.parent} and {source} with different "
                    f"files: kept {first}"
                )
    lines.append(f"repros: {len(kept)} cases merged into {into}")
    return lines


def _check_target(into: Path, sources: Sequence[Path]) -> None:
    if into.is_symlink():
        raise ReproDirError(
            f"{into} is a symbolic link: give a new or empty directory to merge repros into"
        )
    if into.exists() and (not into.is_dir() or any(into.iterdir())):
        raise ReproDirError(f"{into} exists and is not an empty directory: give a new or empty one")
    target = into.resolve()
    for source in sources:
        resolved = source.resolve()
        if target == resolved or target.is_relative_to(resolved) or resolved.is_relative_to(target):
            raise ReproDirError(
                f"{into} and {source} overlap: merge the repros into a directory of its own"
            )


def _copy_tree(source: Path, target: Path, lines: list[str]) -> None:
    """Copy the directories and regular files under ``source`` into ``target`` (a new directory)."""
    target.mkdir()
    for entry in sorted(os.scandir(source), key=lambda entry: entry.name):
        path = Path(entry.path)
        if entry.is_dir(follow_symlinks=False):
            _copy_tree(path, target / entry.name, lines)
        elif entry.is_file(follow_symlinks=False):
            _copy_file(path, target / entry.name)
        else:
            lines.append(f"repros: {path} is a symbolic link or not a regular file: left out")


def _copy_file(source: Path, target: Path) -> None:
    # O_NOFOLLOW: a link swapped in after the listing is refused, not followed; O_EXCL: a file is
    # only ever created, never one already there written through.
    reading = os.open(source, os.O_RDONLY | os.O_NOFOLLOW)
    try:
        writing = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
        with open(reading, "rb", closefd=False) as read, open(writing, "wb") as write:
            while chunk := read.read(1 << 20):
                write.write(chunk)
    finally:
        os.close(reading)


def _digest(directory: Path) -> dict[str, str]:
    """Each regular file under ``directory`` (links not followed), by relative path: its sha256."""
    found = {}
    for root, _, files in os.walk(directory):
        for name in files:
            path = Path(root, name)
            if path.is_file() and not path.is_symlink():
                found[path.relative_to(directory).as_posix()] = hashlib.sha256(
                    path.read_bytes()
                ).hexdigest()
    return found
