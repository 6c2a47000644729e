"""Render a case as the source of a standalone repro file.

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
import copy
import hashlib
import io
import operator
import re
import textwrap
from typing import Any

import torch
import torch.fx

from pytest_torchcompile.judging import judge as standalone
from pytest_torchcompile.judging.case import ReproCase
from pytest_torchcompile.judging.host_copy import HostTensor
from pytest_torchcompile.repros.compact import (
    render_compact,
)
from pytest_torchcompile.repros.runtime import full_file_code
from pytest_torchcompile.torch_internals.environment import environment
from pytest_torchcompile.torch_internals.graph_compile import visible_outputs
from pytest_torchcompile.torch_internals.ops import OpOrigin
from pytest_torchcompile.torch_internals.views import unviewed

INLINE_NUMEL = 32
"""Tensors up to this many elements are written into the file; larger ones go to tensors/."""


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
    render = _compact_source if compact else _full_source
    return render(case, module, writer), writer.files


def _compact_source(case: ReproCase, module: str, writer: _TensorWriter) -> str:
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
    )


def _full_source(case: ReproCase, module: str, writer: _TensorWriter) -> str:
    inputs = ",\n".join(f"        {writer.expression(value)}" for value in case.inputs)
    env = environment()
    required = case.required_ops()
    code = full_file_code(_graph_names(module + "\n[\n" + inputs + "\n]"))
    return "\n\n".join(
        [
            "\n".join(_full_header(case, env, required)),
            code.head,
            code.imports,
            code.prelude,
            _config_assignment(case.config_source.strip()),
            _settings(case, required),
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


def _full_header(case: ReproCase, env: dict[str, str], required: list[OpOrigin]) -> list[str]:
    """A full repro's header comment: what it needs, the case's fields, how to run it."""
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
    return header


def _config_assignment(config: str) -> str:
    """The file's Inductor config lines, applied where it is run."""
    return (
        f'INDUCTOR_CONFIG = r"""\n{config}\n"""'
        if config
        else 'INDUCTOR_CONFIG = ""  # all Inductor config values at their defaults'
    ) + "\nSKIPPED_CONFIG = apply_inductor_config(INDUCTOR_CONFIG)"


def _settings(case: ReproCase, required: list[OpOrigin]) -> str:
    """The case's judging settings, as the module-level names the judging code reads."""
    return "\n".join(
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
