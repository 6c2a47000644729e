"""The judging code a repro file carries, so that it needs only torch and judges as the plugin does.

A full repro embeds :mod:`judging.judge` and every module of the plugin it imports, and theirs,
each whole: the rule for those modules (stated by ``tests/unit/repros/test_runtime.py``) is that
they import only the standard library, torch and one another, at module level, and define no
top-level name twice between them. Embedding drops what a reader does without (docstrings, the
``from __future__`` import the repro's head has, the imports between those modules, whose names
then share one namespace) and keeps the rest in dependency order.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import re
import textwrap
from collections.abc import Callable
from types import ModuleType
from typing import Any

from pytest_torchcompile.judging import judge

PACKAGE = "pytest_torchcompile"


def plugin_imports(module: ModuleType) -> list[str]:
    """The modules of the plugin that ``module`` imports at module level, in order."""
    tree = ast.parse(inspect.getsource(module))
    return [node.module for node in tree.body
            if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == PACKAGE]


def runtime_modules(root: ModuleType = judge) -> list[ModuleType]:
    """``root`` and the plugin's modules it needs, each after the modules it imports."""
    ordered: list[ModuleType] = []

    def visit(module: ModuleType) -> None:
        if module in ordered:
            return
        for name in plugin_imports(module):
            visit(importlib.import_module(name))
        ordered.append(module)

    visit(root)
    return ordered


def embedded_source(code: ModuleType | Callable[..., Any]) -> str:
    """A module's or a function's code as a repro embeds it: without docstrings (but where one is
    a whole body), the ``from __future__`` import, imports of the plugin's own modules and the second of two blank
    lines."""
    source = textwrap.dedent(inspect.getsource(code))
    left_out: set[int] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] in ("__future__", PACKAGE):
            left_out.update(range(node.lineno, (node.end_lineno or node.lineno) + 1))
        body = getattr(node, "body", None)
        # A docstring that is the whole body stays: the body would be empty without it.
        if isinstance(node, ast.Module | ast.FunctionDef | ast.ClassDef) and body and len(body) > 1 \
                and ast.get_docstring(node) is not None:
            left_out.update(range(body[0].lineno, (body[0].end_lineno or body[0].lineno) + 1))
    kept = [line for number, line in enumerate(source.splitlines(), 1) if number not in left_out]
    return re.sub(r"\n{3,}", "\n\n", "\n".join(kept)).strip()


def runtime_source() -> str:
    """The judging code of a full repro file: :func:`runtime_modules`, each embedded whole."""
    return "\n\n".join(embedded_source(module) for module in runtime_modules())
