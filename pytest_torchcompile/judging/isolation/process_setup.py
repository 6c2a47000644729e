"""What a judging process is set up with before it judges: a repro's Inductor config, parsed into
patches, and the setup modules the process that found the failure had."""

from __future__ import annotations

import ast
import contextlib
import importlib
import importlib.util
import os
import sys
from pathlib import Path
from typing import Any

import torch

from pytest_torchcompile.common.allowed import SETUP_ENV, is_setup_file, setup_entries
from pytest_torchcompile.torch_internals.config import inductor_config_has

CONFIG_PREFIX = "torch._inductor.config."


def import_setup_modules() -> None:
    """Import what :data:`SETUP_ENV` names (once per process: imports are cached)."""
    for entry in setup_entries(os.environ.get(SETUP_ENV, "")):
        if is_setup_file(entry):
            path = Path(entry).resolve()
            name = f"_pytest_torchcompile_setup_{path.stem}"
            if name in sys.modules:
                continue
            spec = importlib.util.spec_from_file_location(name, path)
            if spec is None or spec.loader is None:
                raise ImportError(f"{SETUP_ENV}: cannot import {entry}")
            module = importlib.util.module_from_spec(spec)
            sys.modules[name] = module
            spec.loader.exec_module(module)
        else:
            importlib.import_module(entry)


def config_patches(config_source: str) -> dict[str, Any]:
    """``torch._inductor.config.NAME = VALUE`` lines (a repro's config) as ``{NAME: value}``.

    Values are evaluated rather than the lines executed, so that they can be applied as a patch
    that is undone afterwards; modules named by values (custom passes) are imported first. A name
    this torch's config lacks (a repro written on another torch) is left out, as the repro file
    itself skips it.
    """
    patches: dict[str, Any] = {}
    for line in config_source.splitlines():
        line = line.strip()
        if not line.startswith(CONFIG_PREFIX):
            continue
        name, separator, expression = line[len(CONFIG_PREFIX) :].partition("=")
        if not separator:
            raise ValueError(f"not an Inductor config assignment: {line!r}")
        if not inductor_config_has(name.strip()):
            continue
        patches[name.strip()] = eval(expression.strip(), _namespace_for(expression.strip()))
    return patches


def _namespace_for(expression: str) -> dict[str, Any]:
    """Globals for evaluating a config value: torch, inf/nan, and every module it names."""
    namespace: dict[str, Any] = {"torch": torch, "inf": float("inf"), "nan": float("nan")}
    for node in ast.walk(ast.parse(expression, mode="eval")):
        dotted = _dotted_name(node)
        if dotted is None or dotted.split(".")[0] in namespace:
            continue
        parts = dotted.split(".")
        for length in range(len(parts), 0, -1):
            with contextlib.suppress(ImportError):
                importlib.import_module(".".join(parts[:length]))
                namespace[parts[0]] = importlib.import_module(parts[0])
                break
    return namespace


def _dotted_name(node: ast.AST) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _dotted_name(node.value)
        return None if base is None else f"{base}.{node.attr}"
    return None
