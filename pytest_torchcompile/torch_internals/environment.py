"""Versions, devices, the Inductor config and the features this torch leaves off, for repro
headers and reports."""

from __future__ import annotations

import errno
import os
import platform
from pathlib import Path
from typing import Any

import torch
import torch.fx

from pytest_torchcompile.torch_internals.availability import features_off
from pytest_torchcompile.torch_internals.config import inductor_config_diff


def environment() -> dict[str, str]:
    """Versions and device names for repro headers and reports."""
    env = {
        "torch": torch.__version__,
        "python": platform.python_version(),
        "cpu": platform.processor() or platform.machine(),
    }
    try:
        import triton

        env["triton"] = triton.__version__
    except ImportError:
        env["triton"] = "not installed"
    if torch.cuda.is_available():
        env["cuda_device"] = torch.cuda.get_device_name()
        env["cuda"] = str(torch.version.cuda)
    return env


def report_environment() -> dict[str, Any]:
    """Versions, devices, the non-default Inductor config and the features this torch leaves
    off: the ``environment`` of a report."""
    return {**environment(), "inductor_config": inductor_config_diff(),
            "features_off": [feature.to_dict() for feature in features_off()]}


# Errors of the file system, not of the compiler: no permission, a read-only or full disk.
_ENVIRONMENT_ERRNOS = frozenset({errno.EACCES, errno.EPERM, errno.EROFS, errno.ENOSPC, errno.EDQUOT})
# Inductor's own word that it found no C++ compiler it can run (torch._inductor.exc), by name:
# the check must not import the compiler to read an error.
_NO_COMPILER = "InvalidCxxCompiler"


ENVIRONMENT_NOT_JUDGED = "the environment failed the compile, not Inductor"
"""How a check or graph that :func:`environment_failure` stopped is reported, before the error."""


def environment_failure(error: BaseException | None) -> BaseException | None:
    """The error of the environment behind ``error`` (raised by Inductor, which wraps what it
    caught), or None where it is the compiler's: a file system that refuses Inductor's cache or
    its output (no permission, read-only, full), or no C++ compiler to run."""
    seen: set[int] = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        if type(error).__name__ == _NO_COMPILER or (
                isinstance(error, OSError) and (isinstance(error, PermissionError) or error.errno in _ENVIRONMENT_ERRNOS)):
            return error
        error = error.__cause__ or error.__context__
    return None


INDUCTOR_CACHE_VARIABLE = "TORCHINDUCTOR_CACHE_DIR"


def named_inductor_cache() -> Path | None:
    """The cache directory the environment names for Inductor, or None where it names none (the
    default, found only by importing the compiler, is left to the first compile)."""
    named = os.environ.get(INDUCTOR_CACHE_VARIABLE)
    return Path(os.path.abspath(named)) if named else None
