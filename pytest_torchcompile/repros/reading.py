"""Read a repro file's text back without importing or running it: its header fields, its graph's
source and ops, its recorded kind and Inductor config lines.
"""

from __future__ import annotations

import ast
import builtins
import itertools
import re
from collections.abc import Iterable
from pathlib import Path

from pytest_torchcompile.common.files import (
    NotARegularFile,
    TooLarge,
    read_bounded,
)
from pytest_torchcompile.judging.judge import ReproBroken
from pytest_torchcompile.judging.stages import qualified_op_name

HEADER_BYTES = 64 * 2**10
"""The most of a file read to tell whether it is a repro: its header comments, never the rest."""

MAX_REPRO_BYTES = 64 * 2**20
"""The most a repro file, or its case's bug report, is read of: a larger one is refused."""


class NotARepro(Exception):
    """A file that is no repro file of pytest-torchcompile, told from its header without running
    it or reading past the header: the message says why."""


def header_fields(path: Path) -> dict[str, str]:
    """The fields of a repro file's header comment (``case``, ``status``, ``ops``, ``stage``,
    ``env``, ...; ``note`` lines joined), read from its first ``HEADER_BYTES`` without running the
    file. Raises :class:`NotARepro` where ``path`` is no regular file (a pipe is never opened for
    reading), cannot be read, or its header is not UTF-8 or states no case, status and ops."""
    fields: dict[str, str] = {}
    for line in _header_lines(path):
        match = re.match(r"# (\w+):\s+(.*)", line)
        if match:
            name, value = match.groups()
            fields[name] = f"{fields[name]} {value}" if name in fields else value
    if not {"case", "status", "ops"} <= fields.keys():
        raise NotARepro("its header states no case, status and ops")
    return fields


def _header_lines(path: Path) -> list[str]:
    """The comment lines a file opens with, read from its first ``HEADER_BYTES``; raises
    :class:`NotARepro` where they cannot be read as a header."""
    try:
        head = read_bounded(path, HEADER_BYTES, head=True)
    except NotARegularFile:
        raise NotARepro("it is not a regular file") from None
    except OSError as error:
        raise NotARepro(f"cannot read it: {error.strerror or error}") from None
    lines = head.splitlines()
    if len(head) == HEADER_BYTES:
        lines.pop()  # the line the bound cuts is no line of the header
    try:
        return [
            line.decode() for line in itertools.takewhile(lambda raw: raw.startswith(b"#"), lines)
        ]
    except UnicodeDecodeError:
        raise NotARepro("its header is not UTF-8 text") from None


def repro_source(path: Path) -> str:
    """The text of a repro file, or of its case's bug report: a regular file of at most
    ``MAX_REPRO_BYTES`` of UTF-8. Raises :class:`ReproBroken` saying why it cannot be read."""
    try:
        return read_bounded(path, MAX_REPRO_BYTES).decode()
    except NotARegularFile:
        why = "it is not a regular file"
    except TooLarge:
        why = f"it is larger than {MAX_REPRO_BYTES // 2**20} MiB"
    except UnicodeDecodeError:
        why = "it is not UTF-8 text"
    except OSError as error:
        why = error.strerror or str(error)
    raise ReproBroken(f"{path.name} cannot be read: {why}")


def graph_source(path: Path) -> str:
    """The graph module's code in a repro file (its ``class Repro``)."""
    source = repro_source(path)
    start = source.find("\nclass Repro(")
    end = source.find("\ndef make_inputs():", start)
    return source[start + 1 : end].rstrip() if start >= 0 and end >= 0 else ""


# The operator functions fx writes as Python's operators (its ``magic_methods`` and
# ``inplace_methods``), by the syntax that writes them.
_BINARY_OPERATORS: dict[type[ast.AST], str] = {
    ast.Add: "add",
    ast.Sub: "sub",
    ast.Mult: "mul",
    ast.FloorDiv: "floordiv",
    ast.Div: "truediv",
    ast.Mod: "mod",
    ast.Pow: "pow",
    ast.LShift: "lshift",
    ast.RShift: "rshift",
    ast.BitAnd: "and_",
    ast.BitOr: "or_",
    ast.BitXor: "xor",
    ast.MatMult: "matmul",
    ast.Eq: "eq",
    ast.NotEq: "ne",
    ast.Lt: "lt",
    ast.Gt: "gt",
    ast.LtE: "le",
    ast.GtE: "ge",
    ast.UAdd: "pos",
    ast.USub: "neg",
    ast.Invert: "invert",
}


def file_graph_ops(path: Path) -> list[str]:
    """The distinct ops of a repro file's graph, in order, named as ``stages.graph_ops`` names
    them: read from the text of its ``class Repro`` (``ast``), the file never imported or run.
    Raises :class:`ReproBroken` where the file holds no graph that reads so."""
    forward = _forward(path)
    # The graph's values: its inputs and what its lines assign. A call on one is a method's.
    local = {argument.arg for argument in forward.args.args} | {
        node.id
        for node in ast.walk(forward)
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store)
    }
    return list(
        dict.fromkeys(name for line in forward.body for name in _statement_ops(line, local))
    )


def _forward(path: Path) -> ast.FunctionDef:
    """The ``forward`` of a repro file's ``class Repro``, parsed from its text."""
    try:
        tree = ast.parse(graph_source(path))
    except (SyntaxError, ValueError) as error:
        raise ReproBroken(f"the repro file's graph cannot be read: {error}") from None
    forward = next(
        (
            node
            for top in tree.body
            if isinstance(top, ast.ClassDef) and top.name == "Repro"
            for node in top.body
            if isinstance(node, ast.FunctionDef) and node.name == "forward"
        ),
        None,
    )
    if forward is None:
        raise ReproBroken("the repro file holds no graph (class Repro with a forward)")
    return forward


def _statement_ops(statement: ast.stmt, local: set[str]) -> list[str]:
    """The ops one line of a graph's code calls (an ``x = None`` that frees a value, a
    ``return``, a read of a constant: none)."""
    if isinstance(statement, ast.AugAssign):
        name = _BINARY_OPERATORS.get(type(statement.op), "")
        return [f"operator.i{name.rstrip('_')}", *_value_ops(statement.value, local)]
    if isinstance(statement, ast.Assign):
        if any(isinstance(target, ast.Subscript) for target in statement.targets):
            return ["operator.setitem"]
        return _value_ops(statement.value, local)
    if isinstance(statement, ast.Expr):
        return _value_ops(statement.value, local)
    return []


def _value_ops(value: ast.expr, local: set[str]) -> list[str]:
    if isinstance(value, ast.BinOp | ast.UnaryOp):
        return [f"operator.{_BINARY_OPERATORS.get(type(value.op), type(value.op).__name__)}"]
    if isinstance(value, ast.Compare) and len(value.ops) == 1:
        return [f"operator.{_BINARY_OPERATORS.get(type(value.ops[0]), 'compare')}"]
    if isinstance(value, ast.Attribute) and _dotted(value)[:1] != ["self"]:
        return ["builtins.getattr"]  # fx writes getattr(x, "name") as x.name
    if not isinstance(value, ast.Call):
        return []  # a constant, a name, an item read (getitem, never counted), a module attribute
    return _called_ops(_dotted(value.func), local)


def _called_ops(parts: list[str], local: set[str]) -> list[str]:
    """The op a call of the dotted name ``parts`` is ([] where the callee is no dotted name)."""
    if not parts:
        return []
    if parts[0] == "self":
        return [".".join(parts[1:])]  # a submodule called: its target
    if parts[0] in local:
        return [parts[-1]]  # a method called: its name
    if parts[:2] == ["torch", "ops"]:
        return [".".join(parts[2:]).removesuffix(".default")]
    module = ".".join(parts[:-1]) or ("builtins" if hasattr(builtins, parts[0]) else "")
    return [qualified_op_name(module, parts[-1])]


def _dotted(node: ast.expr) -> list[str]:
    """``["torch", "ops", "aten", "relu", "default"]`` for that dotted name; [] for any other
    expression."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.insert(0, node.attr)
        node = node.value
    return [node.id, *parts] if isinstance(node, ast.Name) else []


def file_recorded_kind(path: Path) -> str | None:
    """The failure kind a repro file records (its ``KIND = ...``, alone or among other names),
    read from its text; None where it states none."""
    try:
        tree = ast.parse(repro_source(path))
    except (ReproBroken, SyntaxError, ValueError):
        return None
    for statement in tree.body:
        for name, given in _assignments(statement):
            if isinstance(name, ast.Name) and name.id == "KIND":
                kind = given.value if isinstance(given, ast.Constant) else None
                return kind if isinstance(kind, str) else None
    return None


def _assignments(statement: ast.stmt) -> Iterable[tuple[ast.expr, ast.expr]]:
    """The (target, value) pairs a top-level statement assigns: one for ``A = 1``, one for each
    name of ``A, B = 1, 2``; none for any other statement."""
    if not isinstance(statement, ast.Assign) or len(statement.targets) != 1:
        return []
    target, value = statement.targets[0], statement.value
    if isinstance(target, ast.Tuple) and isinstance(value, ast.Tuple):
        return zip(target.elts, value.elts, strict=False)
    return [(target, value)]


def config_lines(path: Path) -> str:
    """The Inductor config lines of a repro file; raises :class:`ReproBroken` where it cannot be
    read (:func:`repro_source`)."""
    return "\n".join(
        line
        for line in repro_source(path).splitlines()
        if line.startswith("torch._inductor.config.")
    )
