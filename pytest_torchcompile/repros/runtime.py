"""The code a repro file carries, so that it needs only torch and judges as the plugin does.

A full repro embeds :mod:`judging.judge` and every module of the plugin it imports, and theirs,
each whole: the rule for those modules (stated by ``tests/unit/repros/test_runtime.py``) is that
they import only the standard library, torch and one another, at module level, and define no
top-level name twice between them. Around them it embeds the modules of ``repros.embedded`` (its
head, the loading of its inputs, its tracer, its config and its entry points), read from their
files, never imported. Embedding drops what a reader does without (docstrings, the
``from __future__`` import the repro's head has, the imports between those modules, whose names
then share one namespace, and imports for the type checker alone), gathers every module's other
imports into one block after the head, and keeps the rest in dependency order.
"""

from __future__ import annotations

import ast
import functools
import importlib
import importlib.util
import inspect
import re
import textwrap
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

PACKAGE = "pytest_torchcompile"


def plugin_imports(source: str) -> list[str]:
    """The modules of the plugin that ``source`` imports at module level, in order."""
    return [
        node.module
        for node in ast.parse(source).body
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == PACKAGE
    ]


def runtime_modules() -> list[ModuleType]:
    """The plugin's modules that the code of ``repros.embedded`` imports, and theirs, each after
    the modules it imports: the judging code a full repro file carries."""
    ordered: list[ModuleType] = []

    def visit(module: ModuleType) -> None:
        if module in ordered:
            return
        for name in plugin_imports(inspect.getsource(module)):
            visit(importlib.import_module(name))
        ordered.append(module)

    for embedded in (*PRELUDE, ENTRY):
        for name in plugin_imports(read_module(embedded)):
            if not name.startswith(f"{EMBEDDED}."):  # read, never imported: see read_module
                visit(importlib.import_module(name))
    return ordered


def embedded_source(code: ModuleType | Callable[..., Any], imports: bool = True) -> str:
    """A module's or a function's code as a repro embeds it: without docstrings (but where one is
    a whole body), the ``from __future__`` import, imports of the plugin's own modules and the
    second of two blank lines; without its other top-level imports either unless ``imports``."""
    return _embedded(textwrap.dedent(inspect.getsource(code)), imports)


def _embedded(source: str, imports: bool) -> str:
    tree = ast.parse(source)
    left_out: set[int] = set()
    for node in _left_out(tree, imports):
        left_out.update(range(node.lineno, (node.end_lineno or node.lineno) + 1))
    kept = [line for number, line in enumerate(source.splitlines(), 1) if number not in left_out]
    return re.sub(r"\n{3,}", "\n\n", "\n".join(kept)).strip()


def _left_out(tree: ast.Module, imports: bool) -> Iterator[ast.stmt]:
    """The statements of ``tree`` that a repro does not embed (see :func:`embedded_source`)."""
    for statement in tree.body:
        if _type_checking_block(statement) or (
            not imports and isinstance(statement, ast.Import | ast.ImportFrom)
        ):
            yield statement
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and _future_or_own(node.module):
            yield node
        docstring = _docstring_left_out(node)
        if docstring is not None:
            yield docstring


def _future_or_own(module: str | None) -> bool:
    """Whether an import from ``module`` is one a repro leaves out: ``__future__``'s, or the
    plugin's (whose code the repro embeds)."""
    return module is not None and module.split(".")[0] in ("__future__", PACKAGE)


def _docstring_left_out(node: ast.AST) -> ast.stmt | None:
    """The docstring of a module, class or function, unless it is the whole body (which would be
    empty without it)."""
    if not isinstance(node, ast.Module | ast.FunctionDef | ast.ClassDef):
        return None
    if len(node.body) > 1 and ast.get_docstring(node) is not None:
        return node.body[0]
    return None


def _type_checking_block(node: ast.stmt) -> bool:
    """Whether ``node`` is ``if TYPE_CHECKING:``, whose imports only the type checker sees."""
    return (
        isinstance(node, ast.If)
        and isinstance(node.test, ast.Name)
        and node.test.id == "TYPE_CHECKING"
    )


def runtime_source(imports: bool = True, modules: list[ModuleType] | None = None) -> str:
    """The judging code of a full repro file: ``modules`` (:func:`runtime_modules` unless
    given), each embedded whole."""
    chosen = runtime_modules() if modules is None else modules
    return "\n\n".join(embedded_source(module, imports) for module in chosen)


EMBEDDED = f"{PACKAGE}.repros.embedded"
HEAD = f"{EMBEDDED}.head"
PRELUDE = (f"{EMBEDDED}.layout", f"{EMBEDDED}.tracing", f"{EMBEDDED}.config")
"""What comes before the graph: loading its inputs, its tracer, its Inductor config."""
ENTRY = f"{EMBEDDED}.entry"


@functools.cache
def read_module(name: str) -> str:
    """The source of a module of ``repros.embedded``, read from its file once per process: its
    code runs only inside a repro file."""
    spec = importlib.util.find_spec(name)
    if spec is None or spec.origin is None:
        raise ImportError(f"no module {name}")
    return Path(spec.origin).read_text()


def embedded_functions(name: str, functions: Iterable[str]) -> str:
    """The top-level ``functions`` of module ``name`` of ``repros.embedded``, in the order given,
    each as :func:`embedded_source` embeds a function (read from the file, never imported)."""
    source = read_module(name)
    defined = {
        node.name: node for node in ast.parse(source).body if isinstance(node, ast.FunctionDef)
    }
    lines = source.splitlines()
    return "\n".join(
        _embedded(
            "\n".join(lines[defined[function].lineno - 1 : defined[function].end_lineno]),
            imports=False,
        )
        for function in functions
    )


def embedded_module(name: str) -> tuple[str, str]:
    """Module ``name`` of ``repros.embedded`` as a repro embeds it whole (read, never imported),
    and the import lines its code needs."""
    source = read_module(name)
    return _embedded(source, imports=False), _import_lines(_imports(source))


@dataclass(frozen=True)
class FullFileCode:
    """The code of a full repro file, in the order it is written, between which the renderer
    puts the file's own lines (config, settings, graph, inputs)."""

    head: str
    imports: str
    prelude: str
    judging: str
    entry: str


def full_file_code(graph_names: Iterable[tuple[str, str]] = ()) -> FullFileCode:
    """The embedded code of a full repro file; ``graph_names`` the ``(module, name)`` imports the
    file's graph and inputs need (``torch.device``, ``math.inf``)."""
    head = read_module(HEAD)
    prelude = [read_module(name) for name in PRELUDE]
    entry = read_module(ENTRY)
    judging = runtime_modules()
    sources = [*prelude, *(inspect.getsource(module) for module in judging), entry]
    already = set(_imports(head))
    needed = [statement for statement in _imports(*sources) if statement not in already]
    needed += [
        ("from", module, name, None)
        for module, name in graph_names
        if ("from", module, name, None) not in already | set(needed)
    ]
    return FullFileCode(
        head="from __future__ import annotations\n\n" + _embedded(head, imports=True),
        imports=_import_lines(needed),
        prelude="\n\n".join(_embedded(source, imports=False) for source in prelude),
        judging=runtime_source(imports=False, modules=judging),
        entry=_embedded(entry, imports=False),
    )


_Import = tuple[str, str, str, str | None]
"""``("import", module, "", alias)`` or ``("from", module, name, alias)``."""


def _imports(*sources: str) -> list[_Import]:
    """The top-level imports of ``sources`` that a repro keeps (not the plugin's own, not
    ``__future__``, not the type checker's), once each, in the order they first appear."""
    found: list[_Import] = []
    for source in sources:
        for node in ast.parse(source).body:
            found += [statement for statement in _kept_imports(node) if statement not in found]
    return found


def _kept_imports(node: ast.stmt) -> list[_Import]:
    """The imports of one top-level statement that a repro keeps."""
    if isinstance(node, ast.Import):
        return [("import", alias.name, "", alias.asname) for alias in node.names]
    if (
        not isinstance(node, ast.ImportFrom)
        or node.module is None
        or node.level != 0
        or _future_or_own(node.module)
    ):
        return []
    return [
        ("from", node.module, alias.name, alias.asname)
        for alias in node.names
        if (node.module, alias.name) != ("typing", "TYPE_CHECKING")
    ]


def _import_lines(statements: list[_Import]) -> str:
    """``statements`` as import lines: plain imports, then one line per module imported from,
    each group the standard library's first and sorted by module."""

    lines = [
        f"import {module}" + (f" as {alias}" if alias else "")
        for kind, module, _, alias in sorted(
            statements, key=lambda statement: _import_order(statement[1])
        )
        if kind == "import"
    ]
    modules = sorted(
        {module for kind, module, _, _ in statements if kind == "from"}, key=_import_order
    )
    for module in modules:
        names = [
            name + (f" as {alias}" if alias else "")
            for kind, source, name, alias in statements
            if kind == "from" and source == module
        ]
        lines.append(f"from {module} import {', '.join(names)}")
    return "\n".join(lines)


def _import_order(module: str) -> tuple[bool, str]:
    """Where the imports of ``module`` go: the standard library's first, then torch's, by name."""
    return module.split(".")[0] == "torch", module
