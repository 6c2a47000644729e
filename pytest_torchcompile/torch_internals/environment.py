"""Versions, devices, the Inductor config and the features this torch leaves off, for repro
headers and reports."""

from __future__ import annotations

import errno
import getpass
import os
import platform
import re
import tempfile
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
        # Optional: triton is the CUDA extra.
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
    return {
        **environment(),
        "inductor_config": inductor_config_diff(),
        "features_off": [feature.to_dict() for feature in features_off()],
    }


# Errors of the file system, not of the compiler: no permission, a read-only or full disk.
_ENVIRONMENT_ERRNOS = frozenset(
    {errno.EACCES, errno.EPERM, errno.EROFS, errno.ENOSPC, errno.EDQUOT}
)
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
            isinstance(error, OSError)
            and (isinstance(error, PermissionError) or error.errno in _ENVIRONMENT_ERRNOS)
        ):
            return error
        error = error.__cause__ or error.__context__
    return None


INDUCTOR_CACHE_VARIABLE = "TORCHINDUCTOR_CACHE_DIR"


def inductor_cache() -> tuple[Path, bool]:
    """The cache directory Inductor will use, and whether the environment names it (else it is
    Inductor's default). The default is found as ``torch._inductor.runtime.cache_dir_utils``
    finds it (``torchinductor_<user>`` in the temporary directory), written out here rather than
    imported: importing that module imports the compiler, seconds at the start of every run (paid
    by none that compiles nothing), and the warnings its import raises would reach no test that
    sees them without the plugin."""
    named = os.environ.get(INDUCTOR_CACHE_VARIABLE)
    if named:
        return Path(os.path.abspath(named)), True
    try:
        user = getpass.getuser()
    except (KeyError, ModuleNotFoundError, OSError):
        getuid = getattr(os, "getuid", None)
        user = f"uid_{getuid()}" if callable(getuid) else "unknown_user"
    directory = os.path.join(
        tempfile.gettempdir(), "torchinductor_" + re.sub(r'[\\/:*?"<>|]', "_", user)
    )
    return Path(os.path.abspath(directory)), False
