"""The ops a graph calls that a library registers: their modules imported before the graph runs.

Embedded in every full repro file with ``judge.py``: torch and the standard library only.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Sequence

import torch


def register_ops(required: Sequence[tuple[str, str | None, str | None]]) -> str | None:
    """Import the modules that register the ops a graph calls (``(namespace::name, module,
    sys.path entry)``); None once every op exists, else what is missing and why."""
    for qualname, module, search_path in required:
        namespace, name = qualname.split("::", 1)
        if module is not None and not _has_op(namespace, name):
            try:
                _import_registering(module, search_path)
            except Exception as error:
                return (
                    f"op torch.ops.{namespace}.{name} is registered by module {module}, which does not "
                    f"import here: {type(error).__name__}: {error}"
                )
        if not _has_op(namespace, name):
            where = (
                f"importing {module} does not register it"
                if module is not None
                else "the module or library that registers it is unknown: load it before running"
            )
            return f"op torch.ops.{namespace}.{name} is missing: {where}"
    return None


def _import_registering(module: str, search_path: str | None) -> None:
    """Import ``module``, from ``search_path`` where it is not found on ``sys.path``."""
    try:
        importlib.import_module(module)
    except ModuleNotFoundError:
        if not search_path or search_path in sys.path:
            raise
        sys.path.append(search_path)
        importlib.import_module(module)


def _has_op(namespace: str, name: str) -> bool:
    try:
        return hasattr(getattr(torch.ops, namespace), name)
    except Exception:
        return False
