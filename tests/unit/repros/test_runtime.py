"""The judging code a full repro embeds: whole modules, under a rule each test here states."""

from __future__ import annotations

import ast
import inspect
import subprocess
import sys
from collections import Counter
from types import ModuleType

from pytest_torchcompile.judging import judge, oracle, rule
from pytest_torchcompile.repros.runtime import (
    PACKAGE,
    embedded_source,
    runtime_modules,
    runtime_source,
)
from tests.unit.repros.test_embedded import top_level_names

BLOCK_THE_PLUGIN = f"""
import importlib.abc, sys

class Blocked(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] == {PACKAGE!r}:
            raise ImportError("a repro may not import " + name)

sys.meta_path.insert(0, Blocked())
"""


def top_level_definitions(module: ModuleType) -> list[str]:
    return top_level_names(ast.parse(inspect.getsource(module)))


def test_the_runtime_is_what_the_embedded_code_imports_of_the_plugin_dependencies_first() -> None:
    modules = runtime_modules()
    assert judge in modules and rule in modules and oracle not in modules
    for position, module in enumerate(modules):
        for imported in (
            node.module
            for node in ast.parse(inspect.getsource(module)).body
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith(PACKAGE)
        ):
            assert imported in [earlier.__name__ for earlier in modules[:position]], (
                module.__name__,
                imported,
            )


def test_runtime_modules_import_only_the_standard_library_torch_and_each_other_at_module_level() -> (
    None
):
    names = {module.__name__ for module in runtime_modules()}
    for module in runtime_modules():
        tree = ast.parse(inspect.getsource(module))
        top_level = {id(node) for node in tree.body}
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                imported = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                imported = [node.module]
            else:
                continue
            for name in imported:
                root = name.split(".")[0]
                if root == PACKAGE:
                    assert name in names and id(node) in top_level, (module.__name__, name)
                else:
                    assert (
                        root == "torch" or root in sys.stdlib_module_names or root == "__future__"
                    ), (module.__name__, name)


def test_no_top_level_name_is_defined_by_two_runtime_modules() -> None:
    counts = Counter(
        name for module in runtime_modules() for name in set(top_level_definitions(module))
    )
    assert [name for name, count in counts.items() if count > 1] == []


def test_every_definition_of_every_runtime_module_is_embedded() -> None:
    source = runtime_source()
    tree = ast.parse(source)
    embedded = {node.name for node in tree.body if isinstance(node, ast.FunctionDef | ast.ClassDef)}
    for module in runtime_modules():
        defined = {
            node.name
            for node in ast.parse(inspect.getsource(module)).body
            if isinstance(node, ast.FunctionDef | ast.ClassDef)
        }
        assert defined <= embedded, module.__name__
    assert PACKAGE not in source.replace(f'"{PACKAGE}', "")


def test_embedding_drops_docstrings_and_keeps_the_code() -> None:
    source = embedded_source(rule.leaf_verdict)
    assert source.startswith("def leaf_verdict(") and '"""' not in source
    assert embedded_source(rule).count("def ") == inspect.getsource(rule).count("def ")


def test_the_runtime_judges_in_a_process_that_cannot_import_the_plugin() -> None:
    program = (
        "from __future__ import annotations\n"
        + BLOCK_THE_PLUGIN
        + runtime_source()
        + """
x = torch.linspace(-1, 1, 64)
good = compare_tensor("out", x + 1e-9, x, x.double(), 1e-4)
bad = compare_tensor("out", x + 1.0, x, x.double(), 1e-4)
print(good.passed, bad.passed, format_table([bad]).splitlines()[0].split()[0])
"""
    )
    result = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["True", "False", "output"]
