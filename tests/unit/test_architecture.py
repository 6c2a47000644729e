"""The package's dependency rule, read from the source: each package imports only the packages
below it, and the run layer imports no torch at all."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import pytest_torchcompile

PACKAGE = Path(pytest_torchcompile.__file__).parent
ROOT = pytest_torchcompile.__name__

LAYERS = ("", "minifying", "checking", "repros", "judging", "torch_internals", "run")
"""Top to bottom; "" is the public face and the pytest wiring (the package's own modules). A
module may import its own layer and the layers below it, never one above."""

TORCH_FREE = "run"
"""Imports neither torch nor any other layer: it serves processes that check nothing."""


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
            found.extend((node.lineno, f"{base}.{alias.name}") for alias in node.names
                         if f"{base}.{alias.name}" in MODULES)
    return found


MODULES = _modules()


@pytest.mark.parametrize("module", sorted(MODULES))
def test_a_module_imports_only_its_own_layer_and_those_below(module: str) -> None:
    rank = LAYERS.index(_layer(module))
    wrong = [f"line {line}: {imported} ({_layer(imported) or 'public face'})"
             for line, imported in _imports(module, MODULES[module])
             if imported.startswith(f"{ROOT}.") and LAYERS.index(_layer(imported)) < rank]
    assert not wrong, f"{module} ({LAYERS[rank] or 'public face'}) imports from above: {wrong}"


@pytest.mark.parametrize("module", sorted(m for m in MODULES if _layer(m) == TORCH_FREE))
def test_the_run_layer_imports_no_torch(module: str) -> None:
    torch_imports = [f"line {line}: {imported}" for line, imported in _imports(module, MODULES[module])
                     if imported.split(".")[0] in ("torch", "triton", "numpy")]
    assert not torch_imports, f"{module} imports {torch_imports}"


def test_every_package_is_a_layer() -> None:
    packages = {path.name for path in PACKAGE.iterdir() if path.is_dir() and (path / "__init__.py").exists()}
    assert packages == set(LAYERS) - {""}


def test_the_rule_sees_imports_inside_functions_and_relative_ones(tmp_path: Path) -> None:
    module = tmp_path / "phase.py"
    module.write_text("def f():\n    from pytest_torchcompile.minifying.search import minify_graph\n"
                      "from ..run import verdict\n")
    found = {imported for _, imported in _imports(f"{ROOT}.judging.phase", module)}
    assert f"{ROOT}.minifying.search" in found
    assert f"{ROOT}.run.verdict" in found
    assert LAYERS.index(_layer(f"{ROOT}.minifying.search")) < LAYERS.index("judging")
