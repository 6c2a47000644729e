"""How much branching the package's functions hold, read from the source: the share of complex
functions and the most complex one stay under bounds that only come down, and no module grows
past a length, as the layer rule in test_architecture.py is kept.

Cyclomatic complexity as radon counts it: one, plus one for each ``if``, ``elif``, conditional
expression, loop (and its ``else``), ``except``, ``match`` case and comprehension clause, and one
for each operand past the first of ``and``/``or``. A nested function counts in its own right."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest_torchcompile

PACKAGE = Path(pytest_torchcompile.__file__).parent

COMPLEX = 10
"""From this complexity on a function counts as complex (pytest's share: 4.7%)."""

COMPLEX_SHARE_BOUND = 0.025
"""The share of complex functions may not grow past this (2.4% when it was last lowered, from
10.2%; pytest's is 4.7%)."""

MOST_COMPLEX_BOUND = 23
"""No function may be more complex than this (``judging/rule.leaf_verdict``, dense on purpose:
compact repro files embed it)."""

MODULE_LINES_BOUND = 600
"""No module may be longer than this many lines: a module longer holds more than one concept."""

_BRANCHES = (ast.If, ast.IfExp, ast.ExceptHandler, ast.match_case)
_LOOPS = (ast.For, ast.AsyncFor, ast.While)
_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)


def complexity(function: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    """``function``'s cyclomatic complexity, its nested functions and classes left out."""
    count = 1
    pending: list[ast.AST] = list(ast.iter_child_nodes(function))
    while pending:
        node = pending.pop()
        if isinstance(node, (*_FUNCTIONS, ast.ClassDef)):
            continue
        if isinstance(node, _BRANCHES):
            count += 1
        elif isinstance(node, _LOOPS):
            count += 1 + bool(node.orelse)
        elif isinstance(node, ast.comprehension):
            count += 1 + len(node.ifs)
        elif isinstance(node, ast.BoolOp):
            count += len(node.values) - 1
        pending.extend(ast.iter_child_nodes(node))
    return count


def package_functions() -> dict[str, int]:
    """Every function and method of the package, by ``path:line name``, with its complexity."""
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, _FUNCTIONS):
                where = f"{path.relative_to(PACKAGE)}:{node.lineno} {node.name}"
                found[where] = complexity(node)
    return found


def test_the_complexity_count_follows_each_branch() -> None:
    source = """
def f(x, ys):
    if x and x > 1 or not x:
        return [y for y in ys if y if y > 2]
    elif x:
        pass
    for y in ys:
        try:
            pass
        except ValueError:
            pass
    else:
        pass
    def nested():
        if x:
            pass
    return 1 if x else 2
"""
    (function,) = [node for node in ast.parse(source).body if isinstance(node, ast.FunctionDef)]
    # 1 + if 1 + and/or 2 + comprehension 3 + elif 1 + for and its else 2 + except 1 + ifexp 1
    assert complexity(function) == 12


def test_the_share_of_complex_functions_does_not_grow() -> None:
    functions = package_functions()
    complex_ones = sorted((value, where) for where, value in functions.items() if value >= COMPLEX)
    share = len(complex_ones) / len(functions)
    assert share <= COMPLEX_SHARE_BOUND, (
        f"{len(complex_ones)} of {len(functions)} functions ({share:.1%}) have a complexity of "
        f"{COMPLEX} or more; the most complex: {complex_ones[-5:]}"
    )


def test_no_module_is_longer_than_the_bound() -> None:
    long = {
        str(path.relative_to(PACKAGE)): lines
        for path in PACKAGE.rglob("*.py")
        if (lines := len(path.read_text().splitlines())) > MODULE_LINES_BOUND
    }
    assert not long, long


def test_no_function_is_more_complex_than_the_bound() -> None:
    worst = [
        (value, where) for where, value in package_functions().items() if value > MOST_COMPLEX_BOUND
    ]
    assert not worst, worst
