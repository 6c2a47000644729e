"""The code a full repro carries besides the judging modules (``repros/embedded``): real modules,
read and embedded whole, never imported; the file they make is clean to pyflakes."""

from __future__ import annotations

import ast
import sys
from collections import Counter
from pathlib import Path

import pytest
import torch
from torch.fx.experimental.proxy_tensor import make_fx

from pytest_torchcompile.common.kinds import FailureKind
from pytest_torchcompile.judging.case import ReproCase
from pytest_torchcompile.judging.judge import DYNAMO
from pytest_torchcompile.repros.rendering import render_repro
from pytest_torchcompile.repros.runtime import (
    ENTRY,
    HEAD,
    PACKAGE,
    PRELUDE,
    read_module,
    runtime_modules,
)

EMBEDDED = (HEAD, *PRELUDE, ENTRY)
DECLARED = (
    Path(__file__).parents[3] / "pytest_torchcompile" / "repros" / "embedded" / "declared.pyi"
)
RELU_BUG = "torch._inductor.config.cpp.inject_relu_bug_TESTING_ONLY = 'accuracy'"


def infinite_on_a_device(x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor]:
    return (torch.relu(x) * float("inf") + y.to(torch.device("cpu")),)


def writes_into(x: torch.Tensor) -> tuple[torch.Tensor]:
    x.add_(1.0)
    return (x * 2,)


def cases() -> list[ReproCase]:
    """Full repros of several shapes: a post-AOT graph with Inductor config, one whose graph and
    inputs name ``device`` and ``inf``, an error case, a torch-level graph that writes into its input."""
    x, strided = torch.randn(8), torch.randn(40)[2:10]
    level_dynamo = torch.fx.symbolic_trace(writes_into)
    return [
        ReproCase(
            make_fx(lambda t: (torch.relu(t),))(x),
            [x],
            FailureKind.ACCURACY,
            "t::relu",
            config_source=RELU_BUG,
        ),
        ReproCase(
            make_fx(infinite_on_a_device)(x, strided), [x, strided], FailureKind.ACCURACY, "t::inf"
        ),
        ReproCase(
            make_fx(lambda t: (t.sin(),))(x),
            [x],
            FailureKind.COMPILE_ERROR,
            "t::error",
            expected_error="RuntimeError: boom",
        ),
        ReproCase(level_dynamo, [x.clone()], FailureKind.ACCURACY, "t::dynamo", level=DYNAMO),
    ]


def top_level_names(tree: ast.Module) -> list[str]:
    names: list[str] = []
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.ClassDef):
            names.append(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names += [
                name.id
                for target in targets
                for name in ast.walk(target)
                if isinstance(name, ast.Name)
            ]
    return names


def test_embedded_modules_import_only_the_standard_library_torch_and_the_plugins_runtime() -> None:
    allowed = {module.__name__ for module in runtime_modules()} | set(EMBEDDED)
    for name in EMBEDDED:
        for node in ast.walk(ast.parse(read_module(name))):
            if isinstance(node, ast.Import):
                # pytest, where installed, collects the file as a test (an import that may fail)
                roots = [alias.name.split(".")[0] for alias in node.names if alias.name != "pytest"]
                assert all(root == "torch" or root in sys.stdlib_module_names for root in roots), (
                    name,
                    roots,
                )
            elif isinstance(node, ast.ImportFrom) and node.module:
                if node.module.split(".")[0] == PACKAGE:
                    assert node.module in allowed or node.module.endswith(".declared"), (
                        name,
                        node.module,
                    )
                else:
                    root = node.module.split(".")[0]
                    assert root in ("torch", "__future__") or root in sys.stdlib_module_names, (
                        name,
                        node.module,
                    )


def pyflakes_messages(source: str, filename: str) -> list[str]:
    """What pyflakes says of ``source``, one line per message."""
    pyflakes = pytest.importorskip("pyflakes.api")
    reporter = pytest.importorskip("pyflakes.reporter")
    messages: list[str] = []

    class Collected(reporter.Reporter):  # type: ignore[misc]
        def __init__(self) -> None:
            pass

        def flake(self, message: object) -> None:
            messages.append(str(message))

        def syntaxError(self, *args: object) -> None:
            messages.append(f"syntax error: {args}")

    pyflakes.check(source, filename, Collected())
    return messages


def names_defined_twice(source: str) -> list[str]:
    counts = Counter(top_level_names(ast.parse(source)))
    return [name for name, count in counts.items() if count > 1]


@pytest.mark.parametrize("case", cases(), ids=lambda case: case.title)
def test_a_full_repro_is_clean_to_pyflakes_and_defines_no_name_twice(case: ReproCase) -> None:
    source, _ = render_repro(case)

    assert pyflakes_messages(source, "repro.py") == []
    assert names_defined_twice(source) == []


def test_every_name_declared_for_the_embedded_code_is_written_into_a_full_repro() -> None:
    declared = set(top_level_names(ast.parse(DECLARED.read_text())))
    assert {"KIND", "Repro", "make_inputs", "SKIPPED_CONFIG"} <= declared
    for case in cases():
        written = set(top_level_names(ast.parse(render_repro(case)[0])))
        assert declared <= written, (case.title, declared - written)
