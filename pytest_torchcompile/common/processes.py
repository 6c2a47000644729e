"""Which processes still live: what the minify queue's leases and the repro directory's claims
are held by."""

from __future__ import annotations

import os
import sys
from pathlib import Path


def _proc_stat(pid: int) -> tuple[str, str] | None:
    """(state letter, start time) of a process, from /proc; None when it has no entry."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2 :].split()
    return fields[0], fields[19]


def _has_proc() -> bool:
    return sys.platform.startswith("linux") and Path("/proc/self/stat").exists()


def pid_alive(pid: int, start: str | None = None) -> bool:
    """Whether ``pid`` runs on this host and is the process that started at ``start`` (a zombie,
    a dead process whose parent has not reaped it yet, counts as dead)."""
    if _has_proc():
        stat = _proc_stat(pid)
        if stat is None or stat[0] in ("Z", "X"):
            return False
        return start is None or stat[1] == start
    if os.name == "nt":  # os.kill(pid, 0) would send CTRL_C_EVENT there: rely on the lease
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def own_start() -> str | None:
    """This process's start time, as :func:`pid_alive` compares it."""
    stat = _proc_stat(os.getpid()) if _has_proc() else None
    return stat[1] if stat else None
