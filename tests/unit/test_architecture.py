"""The package's dependency rule, read from the source: each package imports only the packages
below it, and the torch-free layers import no torch at all."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

import pytest_torchcompile

PACKAGE = Path(pytest_torchcompile.__file__).parent
ROOT = pytest_torchcompile.__name__

LAYERS = (
    "",
    "hunting",
    "run",
    "minifying",
    "checking",
    "repros",
    "judging",
    "torch_internals",
    "reporting",
    "common",
)
"""Top to bottom; "" is the public face and the pytest wiring (the package's own modules). A
module may import its own layer and the layers below it, never one above."""

TORCH_FREE = ("run", "reporting", "common")
"""Import no torch, not even lazily: they serve processes that check nothing (an xdist controller,
a run without ``--compile-accuracy``, the ``merge`` command)."""


def _layer(module: str) -> str:
    parts = module.split(".")
    assert parts[0] == ROOT, module
    return parts[1] if len(parts) > 2 or (len(parts) == 2 and (PACKAGE / parts[1]).is_dir()) else ""


def _modules() -> dict[str, Path]:
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join((ROOT, *parts))] = path
    return found


def _imports(module: str, path: Path) -> list[tuple[int, str]]:
    """Every module ``module`` imports, at any depth (functions and TYPE_CHECKING blocks too)."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.extend((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            found.append((node.lineno, base))
            found.extend(
                (node.lineno, f"{base}.{alias.name}")
                for alias in node.names
                if f"{base}.{alias.name}" in MODULES
            )
    return found


MODULES = _modules()


@pytest.mark.parametrize("module", sorted(MODULES))
def test_a_module_imports_only_its_own_layer_and_those_below(module: str) -> None:
    rank = LAYERS.index(_layer(module))
    wrong = [
        f"line {line}: {imported} ({_layer(imported) or 'public face'})"
        for line, imported in _imports(module, MODULES[module])
        if imported.startswith(f"{ROOT}.") and LAYERS.index(_layer(imported)) < rank
    ]
    assert not wrong, f"{module} ({LAYERS[rank] or 'public face'}) imports from above: {wrong}"


@pytest.mark.parametrize("module", sorted(m for m in MODULES if _layer(m) in TORCH_FREE))
def test_the_torch_free_layers_import_no_torch(module: str) -> None:
    torch_imports = [
        f"line {line}: {imported}"
        for line, imported in _imports(module, MODULES[module])
        if imported.split(".")[0] in ("torch", "triton", "numpy")
    ]
    assert not torch_imports, f"{module} imports {torch_imports}"


def test_every_package_is_a_layer() -> None:
    packages = {
        path.name for path in PACKAGE.iterdir() if path.is_dir() and (path / "__init__.py").exists()
    }
    assert packages == set(LAYERS) - {""}


def test_the_rule_sees_imports_inside_functions_and_relative_ones(tmp_path: Path) -> None:
    module = tmp_path / "phase.py"
    module.write_text(
        "def f():\n    from pytest_torchcompile.minifying.search import minify_graph\n"
        "from ..common import verdict\n"
    )
    found = {imported for _, imported in _imports(f"{ROOT}.judging.phase", module)}
    assert f"{ROOT}.minifying.search" in found
    assert f"{ROOT}.common.verdict" in found
    assert LAYERS.index(_layer(f"{ROOT}.minifying.search")) < LAYERS.index("judging")


def _cycle(graph: dict[str, set[str]]) -> list[str]:
    """One import cycle of ``graph`` (module -> the modules it imports), or none."""
    done: set[str] = set()
    path: list[str] = []

    def visit(module: str) -> list[str]:
        if module in path:
            return [*path[path.index(module) :], module]
        if module in done:
            return []
        path.append(module)
        for imported in sorted(graph.get(module, ())):
            if found := visit(imported):
                return found
        path.pop()
        done.add(module)
        return []

    for module in sorted(graph):
        if found := visit(module):
            return found
    return []


def test_no_import_cycle_even_through_deferred_imports() -> None:
    graph = {
        module: {
            imported
            for _, imported in _imports(module, path)
            if imported in MODULES and imported != module
        }
        for module, path in MODULES.items()
    }
    assert _cycle(graph) == [], " -> ".join(_cycle(graph))


def test_the_cycle_finder_sees_a_cycle() -> None:
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) == []


MODULE_REASON = "# Imports inside functions: "
"""A module-level comment so begun gives the reason for every import inside the module's functions
(a module of the compiler's seam, whose every deferred import has the one reason)."""


def _unexplained_function_level_imports(source: str) -> list[int]:
    """The lines of imports inside functions that no comment explains: a deferred import says why
    (torch kept out of a run that checks nothing, the compiler imported only as a compile would,
    a module that may be missing), on its own line, on the line above its group of imports, or
    for the whole module in a :data:`MODULE_REASON` comment."""
    lines = source.splitlines()
    if any(line.startswith(MODULE_REASON) for line in lines):
        return []
    nested = {
        node
        for function in ast.walk(ast.parse(source))
        if isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef)
        for node in ast.walk(function)
        if isinstance(node, ast.Import | ast.ImportFrom)
    }
    import_lines = {
        line for node in nested for line in range(node.lineno, (node.end_lineno or node.lineno) + 1)
    }
    unexplained = []
    for node in nested:
        above = node.lineno - 1
        while above in import_lines:
            above -= 1
        if "#" not in lines[node.lineno - 1] and not lines[above - 1].lstrip().startswith("#"):
            unexplained.append(node.lineno)
    return sorted(unexplained)


@pytest.mark.parametrize("module", sorted(MODULES))
def test_a_function_level_import_states_why(module: str) -> None:
    unexplained = _unexplained_function_level_imports(MODULES[module].read_text())
    assert not unexplained, (
        f"{module}: imports inside functions without a comment saying why, lines {unexplained}"
    )


def test_the_reason_rule_reads_comments_above_a_group_of_imports() -> None:
    source = (
        "import os\n\n\ndef f():\n    # Deferred: torch is heavy.\n    import torch\n    from torch import (\n"
        "        fx,\n    )\n\n\ndef g():\n    x = 1\n    import json\n    import re  # optional\n"
    )
    assert _unexplained_function_level_imports(source) == [14]
    assert (
        _unexplained_function_level_imports(f"{MODULE_REASON}the compiler is heavy.\n{source}")
        == []
    )


CODE_LINE = re.compile(r"^\s*(def \w+\(|class \w+[(:]|import \w|from [\w.]+ import )", re.MULTILINE)


def code_in_strings(source: str) -> list[str]:
    """The first line of each string assigned at module level in ``source`` that holds a line of
    Python defining or importing something: code no linter or type checker sees."""
    found = []
    for statement in ast.parse(source).body:
        if isinstance(statement, ast.Assign | ast.AnnAssign) and statement.value is not None:
            found += [
                node.value.strip().splitlines()[0]
                for node in ast.walk(statement.value)
                if isinstance(node, ast.Constant)
                and isinstance(node.value, str)
                and CODE_LINE.search(node.value)
            ]
    return found


@pytest.mark.parametrize("module", MODULES)
def test_no_module_level_string_holds_code(module: str) -> None:
    # The code a repro file carries lives in real modules (repros/embedded), embedded from them.
    assert code_in_strings(MODULES[module].read_text()) == []


def test_the_code_in_strings_rule_sees_snippets_and_leaves_docstrings_and_prose_alone() -> None:
    source = (
        '"""Run ``import torch`` first."""\n'
        'SNIPPET = """\\\ndef load(path):\n    return path\n"""\n'
        'PARTS: dict[str, str] = {"head": "from os import path"}\n'
        'NOTE = "a class of its own: import nothing"\n'
    )
    assert code_in_strings(source) == ["def load(path):", "from os import path"]
