"""Write and load standalone repro files.

A repro is one Python file that needs only torch: the post-AOT graph Inductor lowered (or, where
that graph does not fail on its own, the torch-level graph Dynamo captured), as module code; the real inputs and constants (small ones inline, large ones in ``tensors/<content hash>.pt``
beside it); the Inductor config that differed from default; and the same judging code the plugin
uses. ``python repro.py`` exits 1 while the failure reproduces, 2 when it fails another way, 0 once
fixed, 3 when the repro itself cannot run; ``pytest repro.py`` collects it as one test marked
``inductor_repro``. Ops that ``import torch`` does not define (Inductor's prims, ops a model's
package registers) are registered by importing the modules that define them, named in the file.
"""

from __future__ import annotations

import ast
import builtins
import copy
import hashlib
import importlib.util
import io
import itertools
import json
import operator
import os
import re
import shutil
import socket
import stat
import sys
import tempfile
import textwrap
from dataclasses import dataclass, replace
from pathlib import Path
from types import ModuleType
from typing import Any

import filelock
import torch
import torch.fx

from pytest_torchcompile.common.files import (
    REPRO_NAME,
    NotARegularFile,
    TooLarge,
    atomic_write,
    locked,
    read_bounded,
    remove_stale_temporaries,
    replace_directory,
    temporary_prefix,
)
from pytest_torchcompile.common.kinds import FailureKind
from pytest_torchcompile.common.processes import own_start, pid_alive
from pytest_torchcompile.common.verdict import DEFAULT_TOLERANCE, out_of_memory
from pytest_torchcompile.judging import judge as standalone
from pytest_torchcompile.judging.case import ReproCase
from pytest_torchcompile.judging.copies import clone_values
from pytest_torchcompile.judging.host_copy import HostTensor
from pytest_torchcompile.judging.isolation.config import config_patches
from pytest_torchcompile.judging.judge import ReproBroken, error_signature
from pytest_torchcompile.judging.stages import qualified_op_name
from pytest_torchcompile.repros.compact import (
    compact_disagreement,
    compact_obstacle,
    compact_trace,
    render_compact,
)
from pytest_torchcompile.repros.runtime import full_file_code
from pytest_torchcompile.torch_internals.config import inductor_config, with_inductor_config_undone
from pytest_torchcompile.torch_internals.environment import environment
from pytest_torchcompile.torch_internals.graph_compile import visible_outputs, with_visible_outputs
from pytest_torchcompile.torch_internals.ops import OpOrigin
from pytest_torchcompile.torch_internals.views import unviewed

INLINE_NUMEL = 32
"""Tensors up to this many elements are written into the file; larger ones go to tensors/."""

TENSOR_DIR = "tensors"

HEADER_BYTES = 64 * 2**10
"""The most of a file read to tell whether it is a repro: its header comments, never the rest."""

MAX_REPRO_BYTES = 64 * 2**20
"""The most a repro file, or its case's bug report, is read of: a larger one is refused."""


class NotARepro(Exception):
    """A file that is no repro file of pytest-torchcompile, told from its header without running
    it or reading past the header: the message says why."""


def slugify(nodeid: str, limit: int = 80) -> str:
    """A directory name for a test id; long or colliding ids keep a hash suffix to stay unique."""
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "_", nodeid.replace("::", "__")).strip("_.") or "case"
    if len(slug) > limit:
        digest = hashlib.sha1(nodeid.encode()).hexdigest()[:8]
        slug = f"{slug[: limit - 9]}-{digest}"
    return slug


# --- rendering -----------------------------------------------------------------------------


class _TensorWriter:
    """Turns tensors into source expressions; large ones are saved once, named by content. A
    compact repro's expressions name less (see ``compact``)."""

    def __init__(self, compact: bool = False) -> None:
        self.files: dict[str, bytes] = {}
        self.compact = compact

    def expression(self, value: Any) -> str:
        if isinstance(value, torch.Tensor):
            return self._tensor(value.detach(), value.device, value.requires_grad)
        if isinstance(value, HostTensor):
            return self._tensor(value.data, value.device, value.requires_grad)
        if isinstance(value, torch.SymInt | torch.SymFloat | torch.SymBool):
            raise TypeError("symbolic value at runtime: no concrete input to write")
        if isinstance(value, float) and (value != value or value in (float("inf"), float("-inf"))):
            return f"float({str(value)!r})"
        return repr(value)

    def _tensor(self, value: torch.Tensor, device: torch.device, requires_grad: bool) -> str:
        """The values its memory holds, laid out, then viewed with its negative and conjugate
        bits (a compact file takes no input that has them: ``compact_obstacle``)."""
        neg, conj = value.is_neg(), value.is_conj()
        laid_out = self._laid_out(unviewed(value), device, requires_grad)
        return f"viewed({laid_out}, {neg}, {conj})" if neg or conj else laid_out

    def _laid_out(self, value: torch.Tensor, device: torch.device, requires_grad: bool) -> str:
        meta = f"{value.dtype}, {tuple(value.shape)!r}, {tuple(value.stride())!r}, {str(device)!r}"
        if not self.compact:
            meta += f", {requires_grad}"
        if value.storage_offset():
            meta += f", {value.storage_offset()}"
        grad = ".requires_grad_()" if self.compact and requires_grad else ""
        if value.numel() <= INLINE_NUMEL and not value.is_complex():
            return f"{'_load' if self.compact else '_inline'}({_literal(value.cpu().tolist())}, {meta}){grad}"
        buffer = io.BytesIO()
        torch.save(value.cpu().contiguous().clone(), buffer)
        data = buffer.getvalue()
        name = hashlib.sha256(data).hexdigest()[:20]
        self.files[name] = data
        return f"_load({name!r}, {meta}){grad}"


def _literal(values: Any) -> str:
    text = repr(values)
    return text.replace("inf", "float('inf')").replace("nan", "float('nan')")


def _module_source(gm: torch.fx.GraphModule, class_name: str, writer: _TensorWriter) -> str:
    """A torch.nn.Module class whose forward is the graph; constants become buffers."""
    nested: list[str] = []
    init_lines: list[str] = []
    for node in gm.graph.nodes:
        if node.op != "get_attr":
            continue
        target = str(node.target)
        value = operator.attrgetter(target)(gm)
        if isinstance(value, torch.fx.GraphModule):
            child = f"{class_name}_{re.sub(r'[^A-Za-z0-9_]', '_', target)}"
            nested.append(_module_source(value, child, writer))
            init_lines.append(f"self.{target} = {child}()")
        elif isinstance(value, torch.Tensor | HostTensor):
            init_lines.append(f"self.register_buffer({target!r}, {writer.expression(value)})")
        else:
            init_lines.append(f"self.{target} = {writer.expression(value)}")
    body = textwrap.indent(_forward_code(gm).strip(), "    ")
    init = textwrap.indent("\n".join(["super().__init__()", *init_lines]), "        ")
    return "\n\n".join(
        [
            *nested,
            f"class {class_name}(torch.nn.Module):\n    def __init__(self):\n{init}\n\n{body}\n",
        ]
    )


def _forward_code(gm: torch.fx.GraphModule) -> str:
    """The graph's code, a value nothing reads (an in-place op kept for what it writes) called
    without a name: fx names it and frees it on the same line, which reads as a variable never
    used."""
    unused = {
        node.name
        for node in gm.graph.nodes
        if node.op in ("call_function", "call_method", "call_module") and not node.users
    }
    lines = gm.code.splitlines()
    for index, line in enumerate(lines):
        match = re.fullmatch(r"(\s*)(\w+) = (.*)", line)
        if match is None or match.group(2) not in unused:
            continue
        indent, name, rest = match.groups()
        statement, _, freed = rest.partition(";  ")
        others = [
            other for other in freed.removesuffix(" = None").split(" = ") if other and other != name
        ]
        lines[index] = indent + statement + (f";  {' = '.join(others)} = None" if others else "")
    return "\n".join(lines)


def render_repro(case: ReproCase, compact: bool = False) -> tuple[str, dict[str, bytes]]:
    """The repro file's source and the tensor files it needs (name -> bytes); with ``compact``,
    the compact form (``compact``'s rules, which the case must meet: ``compact_obstacle``)."""
    writer = _TensorWriter(compact)
    module = _module_source(_without_annotations(case.gm), "Repro", writer)
    if compact:
        header = _case_fields(case, environment())
        # A torch-level graph's lowering is shown (a wrong decomposition is seen there); a kernel
        # has a file of its own beside the compact file.
        footer = (
            _generated_code_comment(case.generated_code, case.level)
            if case.generated_code and case.level == standalone.DYNAMO
            else ""
        )
        return render_compact(
            case, header, module, [writer.expression(value) for value in case.inputs], footer
        ), writer.files
    inputs = ",\n".join(f"        {writer.expression(value)}" for value in case.inputs)
    env = environment()
    required = case.required_ops()
    modules = sorted(
        {
            origin.module
            for origin in required
            if origin.module is not None and origin.module.split(".")[0] != "torch"
        }
    )
    header = [
        "# pytest-torchcompile repro: only torch is needed to run it"
        + (f", and {', '.join(modules)} for the ops it registers." if modules else "."),
        *_case_fields(case, env),
        "# run:     python repro.py   (exit 1: reproduced, 2: fails differently, 0: fixed,",
        "#                             3: the repro itself cannot run)",
        "#          pytest repro.py   (one test, marked inductor_repro)",
        *_note_fields(case),
    ]
    if case.level == standalone.DYNAMO:
        header[3:3] = [
            "# level:   torch-level graph (Dynamo's, before AOT autograd and Inductor's "
            "decompositions): its post-AOT graph does not fail on its own; compiled "
            "through the whole stack and judged against eager of this graph"
        ]
    if any(sizes and any(not s.isdigit() for s in sizes) for sizes in case.symbolic_sizes):
        header.append(f"# symbolic input sizes: {case.symbolic_sizes}")
    config = case.config_source.strip()
    settings = "\n".join(
        [
            f"KIND = {str(case.kind)!r}",
            f"TOL = {case.tol!r}",
            f"CHECK_NON_FLOAT = {case.check_non_float!r}",
            f"NON_FLOAT_FAILURE = {case.non_float_failure!r}",
            f"EXPECTED_ERROR = {case.expected_error!r}",
            f"ERROR_PATTERN = {case.error_pattern!r}",
            f"GRAD_ENABLED = {case.grad_enabled!r}",
            f"SYMBOLIC_SIZES = {case.symbolic_sizes!r}",
            "# Ops outside aten: (op, the module that registers it (None: torch), its sys.path entry)",
            f"REQUIRED_OPS = {[(o.qualname, o.module, o.search_path) for o in required]!r}",
            f"LEVEL = {case.level!r}",
            "# The outputs Inductor was told the user sees (it keeps their traced strides); None: unmarked",
            f"VISIBLE_OUTPUTS = {visible_outputs(case.gm)!r}",
        ]
    )
    code = full_file_code(_graph_names(module + "\n[\n" + inputs + "\n]"))
    source = "\n\n".join(
        [
            "\n".join(header),
            code.head,
            code.imports,
            code.prelude,
            (
                f'INDUCTOR_CONFIG = r"""\n{config}\n"""'
                if config
                else 'INDUCTOR_CONFIG = ""  # all Inductor config values at their defaults'
            )
            + "\nSKIPPED_CONFIG = apply_inductor_config(INDUCTOR_CONFIG)",
            settings,
            "\n\n" + module.rstrip(),
            "\n\ndef make_inputs():\n    return [\n"
            + inputs
            + ("," if case.inputs else "")
            + "\n    ]",
            "\n\n# --- judging code (the plugin's own rule) ---\n\n" + code.judging,
            "\n\n" + code.entry + "\n",
            *(
                [_generated_code_comment(case.generated_code, case.level)]
                if case.generated_code
                else []
            ),
        ]
    )
    return source, writer.files


GRAPH_NAMES = {"device": "torch", "inf": "math", "nan": "math"}
"""The names a graph's code and its inputs may use that neither defines (fx writes a device as
``device(type='cpu')`` and an infinite constant as ``inf``), by the module they come from."""


def _graph_names(code: str) -> list[tuple[str, str]]:
    """The ``(module, name)`` imports of :data:`GRAPH_NAMES` that ``code`` uses."""
    used = {node.id for node in ast.walk(ast.parse(code)) if isinstance(node, ast.Name)}
    return [(module, name) for name, module in GRAPH_NAMES.items() if name in used]


def _without_annotations(gm: torch.fx.GraphModule) -> torch.fx.GraphModule:
    """``gm``, or a copy of it whose code carries no type annotations: those a traced function's
    own hints leave on its nodes name types the file does not define."""
    if all(node.type is None for node in gm.graph.nodes):
        return gm
    copied = copy.deepcopy(gm)
    for node in copied.graph.nodes:
        node.type = None
    copied.recompile()
    return copied


def _case_fields(case: ReproCase, env: dict[str, str]) -> list[str]:
    """The header lines that ``header_fields`` reads back: case, status, ops, stage, env."""
    return [
        f"# case:    {_one_line(case.title)}",
        f"# status:  {_one_line(case.status_line or case.kind)}",
        f"# ops:     {case.op_count}",
        *([f"# stage:   {case.stage}"] if case.stage else []),
        "# env:     " + ", ".join(f"{k} {v}" for k, v in env.items()),
    ]


def _note_fields(case: ReproCase) -> list[str]:
    return [f"# note:    {_one_line(note)}" for note in case.notes]


_LINE_BREAKING = re.compile("[\x00-\x1f\x7f\x85\u2028\u2029]")


def _one_line(text: str) -> str:
    """``text`` for a ``#`` comment line: control characters (a newline would end the comment and
    make the rest live code) and other line separators written as escapes."""
    return _LINE_BREAKING.sub(lambda match: repr(match.group())[1:-1], text)


def _generated_code_comment(code: str, level: str) -> str:
    lines = "\n".join(f"# {line}".rstrip() for line in code.strip().splitlines())
    what = (
        "the post-AOT graphs AOT autograd and the decompositions made of this graph"
        if level == standalone.DYNAMO
        else "the code Inductor generated for this graph"
    )
    return f"\n# --- {what} (torch {torch.__version__}), to read; the check above compiles afresh ---\n{lines}"


# --- writing -------------------------------------------------------------------------------


def write_repro(
    case: ReproCase, path: Path, within: Path | None = None, compact: bool = False
) -> Path:
    """Write ``case`` to ``path`` (and its tensors beside it), atomically and under a lock; with
    ``within``, only through real directories below it (see ``files.atomic_write``); with
    ``compact``, in the compact form (see ``render_repro``)."""
    source, tensors = render_repro(case, compact)
    with locked(path.parent):
        _write_files(path, source, tensors, within)
    return path


def write_minified(case: ReproCase, path: Path, within: Path | None = None) -> Path:
    """Write a minified ``case`` in the compact form where it can be (see ``compact``), else in
    the full form with a note saying why. A compact file is loaded back first: it is kept only
    when its graph and its eager and fp64 runs are the plugin's."""
    reason = compact_obstacle(case)
    if reason is None:
        write_repro(case, path, within, compact=True)
        try:
            reason = compact_disagreement(load_repro(path).module, case)
        except Exception as error:
            reason = f"it does not load: {error_signature(error)}"
        if reason is None:
            return path
    return write_repro(
        replace(case, notes=[*case.notes, f"the full form, not the compact one: {reason}"]),
        path,
        within,
    )


def _write_files(path: Path, source: str, tensors: dict[str, bytes], within: Path | None) -> None:
    for name, data in tensors.items():
        target = path.parent / TENSOR_DIR / f"{name}.pt"
        if not _holds(target, data):
            atomic_write(target, data, within)
    atomic_write(path, source.encode(), within)


def _holds(path: Path, data: bytes) -> bool:
    """Whether ``path`` is a regular file of exactly ``data``: a tensor file named by its content
    is reused only then, not because a stale or planted file has its name."""
    try:
        if not stat.S_ISREG(path.lstat().st_mode) or path.lstat().st_size != len(data):
            return False
        return path.read_bytes() == data
    except OSError:
        return False


def write_case(case: ReproCase, root: Path, slug: str, owner: str) -> Path:
    """Write ``case`` as the ``repro.py`` of a case directory in ``root`` claimed for ``slug``
    (:func:`unique_case_dir`): into a new directory, complete before it takes the place of what
    was there (the directory an earlier run of the test left, or anything planted, a symbolic
    link included, which is removed, never followed)."""
    source, tensors = render_repro(case)
    directory = unique_case_dir(root, slug, owner)
    remove_stale_temporaries(root, directory.name, ".new")
    staging = Path(
        tempfile.mkdtemp(dir=root, prefix=temporary_prefix(directory.name), suffix=".new")
    )
    try:
        os.chmod(staging, 0o755)  # mkdtemp's 0700 would keep the repros from others
        _write_files(staging / REPRO_NAME, source, tensors, staging)
        with locked(directory):
            replace_directory(staging, directory)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return directory / REPRO_NAME


def unique_case_dir(root: Path, slug: str, owner: str) -> Path:
    """``root/slug``, or ``root/slug-2``, ... : the first name that no live process holds.

    ``<name>.claimed`` holds a name for the process that wrote it, as long as that process lives
    and, within it, for the run (``owner``) that claimed it: so several checks of one test, tests
    whose ids make one slug, and concurrent runs in one directory get distinct directories, while
    a rerun of a test takes its directory back."""
    root.mkdir(parents=True, exist_ok=True)
    me = {"owner": owner, "pid": os.getpid(), "start": own_start(), "host": socket.gethostname()}
    with filelock.FileLock(str(root / ".claims.lock")):
        for suffix in itertools.count(1):
            name = slug if suffix == 1 else f"{slug}-{suffix}"
            claim = root / f"{name}.claimed"
            if not _claim_held(claim, me):
                atomic_write(claim, json.dumps(me).encode(), root)
                return root / name
    raise AssertionError("unreachable")


def _claim_held(claim: Path, me: dict[str, Any]) -> bool:
    """Whether ``claim`` holds its name: for another live process, or for this run of this one.
    A claim that cannot be read (an older format, a partial write) holds nothing."""
    try:
        holder = json.loads(claim.read_text()) if stat.S_ISREG(claim.lstat().st_mode) else None
    except (OSError, ValueError):
        return False
    if not isinstance(holder, dict):
        return False
    if holder.get("host") != me["host"]:
        return True  # another machine's process: its liveness cannot be told from here
    if holder.get("pid") == me["pid"] and holder.get("start") == me["start"]:
        return holder.get("owner") == me["owner"]
    return isinstance(holder.get("pid"), int) and pid_alive(holder["pid"], holder.get("start"))


# --- loading -------------------------------------------------------------------------------


@dataclass
class LoadedRepro:
    path: Path
    module: ModuleType
    case: ReproCase


def load_repro(path: str | os.PathLike[str]) -> LoadedRepro:
    """Import a repro file and rebuild its case (graph traced from its ``Repro`` module)."""
    path = Path(path).resolve()
    name = f"_pytest_torchcompile_repro_{hashlib.sha1(str(path).encode()).hexdigest()[:12]}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import repro {path}")
    module, loader = importlib.util.module_from_spec(spec), spec.loader
    sys.modules[name] = module
    try:
        with_inductor_config_undone(lambda: loader.exec_module(module))
    except Exception as error:
        raise ReproBroken(
            f"the repro file does not load: {type(error).__name__}: {error}"
        ) from error
    finally:
        sys.modules.pop(name, None)
    gm, inputs = _build(module)
    title = next(
        (
            line.split(":", 1)[1].strip()
            for line in repro_source(path).splitlines()
            if line.startswith("# case:")
        ),
        path.parent.name,
    )
    # A compact file (``compact``) names only what its kind of failure needs.
    case = ReproCase(
        gm=gm,
        inputs=inputs,
        kind=_recorded_kind(module),
        title=title,
        tol=getattr(module, "TOL", DEFAULT_TOLERANCE),
        check_non_float=getattr(module, "CHECK_NON_FLOAT", True),
        non_float_failure=getattr(module, "NON_FLOAT_FAILURE", False),
        expected_error=getattr(module, "EXPECTED_ERROR", None),
        error_pattern=getattr(module, "ERROR_PATTERN", None),
        grad_enabled=getattr(module, "GRAD_ENABLED", False),
        symbolic_sizes=getattr(module, "SYMBOLIC_SIZES", []),
        config_source=config_lines(path),
        op_origins=[OpOrigin(*entry) for entry in getattr(module, "REQUIRED_OPS", [])],
        level=getattr(module, "LEVEL", standalone.POST_AOT),
    )
    return LoadedRepro(path, module, case)


def _recorded_kind(module: ModuleType) -> FailureKind:
    """The failure a loaded repro file records (its ``KIND``)."""
    try:
        return FailureKind(module.KIND)
    except (AttributeError, ValueError) as error:
        raise ReproBroken(
            f"the repro file records no failure kind: {type(error).__name__}: {error}"
        ) from error


def _build(module: ModuleType) -> tuple[torch.fx.GraphModule, list[Any]]:
    """The graph and inputs of a loaded repro file (a compact one, or one written before repros
    had ``build``)."""
    try:
        if hasattr(module, "build"):
            return module.build()
        gm = compact_trace(module)(module.Repro())
        return with_visible_outputs(
            gm, getattr(module, "VISIBLE_OUTPUTS", None)
        ), module.make_inputs()
    except Exception as error:
        reason = (
            str(error)
            if type(error).__name__ == "ReproBroken"
            else f"{type(error).__name__}: {error}"
        )
        raise ReproBroken(reason) from error


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
    # The graph's values: its inputs and what its lines assign. A call on one is a method's.
    local = {argument.arg for argument in forward.args.args} | {
        node.id
        for node in ast.walk(forward)
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store)
    }
    return list(
        dict.fromkeys(name for line in forward.body for name in _statement_ops(line, local))
    )


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
    parts = _dotted(value.func)
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
        if not isinstance(statement, ast.Assign) or len(statement.targets) != 1:
            continue
        target, value = statement.targets[0], statement.value
        pairs = (
            zip(target.elts, value.elts, strict=False)
            if isinstance(target, ast.Tuple) and isinstance(value, ast.Tuple)
            else [(target, value)]
        )
        for name, given in pairs:
            if isinstance(name, ast.Name) and name.id == "KIND":
                kind = given.value if isinstance(given, ast.Constant) else None
                return kind if isinstance(kind, str) else None
    return None


def config_lines(path: Path) -> str:
    """The Inductor config lines of a repro file; raises :class:`ReproBroken` where it cannot be
    read (:func:`repro_source`)."""
    return "\n".join(
        line
        for line in repro_source(path).splitlines()
        if line.startswith("torch._inductor.config.")
    )


def load_case(path: str | os.PathLike[str]) -> ReproCase:
    """The case of a repro file, loaded without leaking its Inductor config into this process:
    ``load_repro`` runs the file's config lines, and this patch undoes them afterwards. Raises
    :class:`ReproBroken` when the file cannot run."""
    with inductor_config(config_patches(config_lines(Path(path)))):
        return load_repro(path).case


def repro_defect(path: str | os.PathLike[str]) -> str | None:
    """Why a just-written repro file cannot run (it does not load, or its graph fails eagerly
    on its inputs), or None. Cheap: nothing is compiled."""
    try:
        case = load_case(path)
        with torch.no_grad():
            case.gm(*clone_values(case.inputs))
    except Exception as error:
        if out_of_memory(error):
            return None  # a second copy of a large case does not fit beside the test's: no verdict
        if isinstance(error, ReproBroken):
            return str(error)
        return f"the graph fails when run eagerly on its inputs: {error_signature(error)}"
    return None
