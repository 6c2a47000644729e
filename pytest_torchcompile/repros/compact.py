"""The compact form of a minified repro: a file short enough to paste into a PyTorch issue.

The graph comes first, then its inputs and the Inductor config that differs from the defaults;
then the functions of the rule the failure needs (``judging/rule.py``) and those of
``repros/embedded/compact.py`` its case needs (loading, references, the compile, the check), each
embedded from its module, and a last line that runs the check. It judges as the plugin does. Inputs keep their size, stride and storage offset; what the graph writes into its inputs
is judged as its outputs are; ops that make a tensor from no input (``arange``, ``full``) stay ops
of the traced graph; a torch-level graph compiles through the whole stack, with its gradients in a
training call. A case it cannot express (random ops, memory no op writes, item deletion, inputs
that overlap themselves, a post-AOT graph's inputs that require grad, ops outside aten) keeps the
full form: :func:`compact_obstacle` says why. A compact file is loaded back before it is kept
(:func:`compact_disagreement`): its graph and references must be the plugin's.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import torch

from pytest_torchcompile.common.kinds import FailureKind
from pytest_torchcompile.judging import rule
from pytest_torchcompile.judging.case import ReproCase
from pytest_torchcompile.judging.copies import clone_values
from pytest_torchcompile.judging.judge import DYNAMO, POST_AOT
from pytest_torchcompile.judging.mutation import (
    IN_PLACE_OPERATORS,
    changed,
    mutated_inputs,
    operator_name,
)
from pytest_torchcompile.judging.references import (
    nan_dependent_gradients,
    reference_outputs,
    unwritten_elements,
)
from pytest_torchcompile.judging.seeding import draws_random
from pytest_torchcompile.repros.runtime import (
    EMBEDDED,
    embedded_functions,
    embedded_module,
    embedded_source,
)
from pytest_torchcompile.torch_internals.graph_compile import visible_outputs

RULE_FUNCTIONS: dict[str, tuple[Callable[..., Any], ...]] = {
    FailureKind.ACCURACY: (rule.wider_than_float8, rule.comparable, rule.leaf_verdict),
    FailureKind.COMPILE_ERROR: (rule.error_signature, rule.normalized_error),
    FailureKind.RUNTIME_ERROR: (rule.error_signature, rule.normalized_error),
}


def compact_obstacle(case: ReproCase) -> str | None:
    """Why ``case`` needs the full form, or None."""
    return _graph_obstacle(case) or _values_obstacle(case)


def _graph_obstacle(case: ReproCase) -> str | None:
    """Why the compact form cannot hold ``case``'s graph or its kind of failure, or None."""
    if case.level not in (POST_AOT, DYNAMO):
        return f"a graph of level {case.level}"
    if "delitem" in _operators(case.gm):
        return "item deletion, which fx's tracing does not record"
    if case.kind not in RULE_FUNCTIONS:
        return f"a failure of kind {case.kind}"
    if any(
        origin.module is not None and not _in_torch(origin.module) for origin in case.required_ops()
    ):
        return "ops that a module outside torch registers"
    if draws_random(case.gm):
        return "random ops, which the full form seeds alike"
    return None


def _values_obstacle(case: ReproCase) -> str | None:
    """Why the compact form cannot write ``case``'s inputs or judge what its graph computes from
    them, or None."""
    for value in case.inputs:
        if (obstacle := _input_obstacle(value, case.level)) is not None:
            return obstacle
    try:
        allocates_unwritten = unwritten_elements(case.gm, case.inputs) is not None
    except Exception:
        allocates_unwritten = False
    if allocates_unwritten:
        return "memory no op writes, which the full form leaves unjudged"
    differentiated = any(isinstance(v, torch.Tensor) and v.requires_grad for v in case.inputs)
    if case.level == DYNAMO and differentiated and nan_dependent_gradients(case.gm, case.inputs):
        return "gradients through a NaN, which the full form leaves unjudged"
    return None


def _input_obstacle(value: Any, level: str) -> str | None:
    """Why a compact file cannot write ``value``, an input of a graph of ``level``, or None."""
    if not isinstance(value, torch.Tensor):
        return (
            None
            if isinstance(value, bool | int | float)
            else f"an input of type {type(value).__name__}"
        )
    if not _plain_strided_real(value):
        return "an input that is not a plain strided real tensor"
    if value.requires_grad and level != DYNAMO:
        return "inputs that require grad"
    if _overlaps_itself(_one_per_broadcast(value)):
        return "an input whose elements share memory other than by broadcasting"
    return None


def _plain_strided_real(value: torch.Tensor) -> bool:
    return (
        type(value) is torch.Tensor
        and value.layout == torch.strided
        and not value.is_quantized
        and not value.is_complex()
        and not value.is_neg()
    )


def _one_per_broadcast(value: torch.Tensor) -> torch.Tensor:
    """``value`` with each broadcast dimension narrowed to its one element: what a compact file
    writes of it before laying it out with its strides again."""
    for dim, (size, stride) in enumerate(zip(value.shape, value.stride(), strict=True)):
        if stride == 0 and size > 1:
            value = value.narrow(dim, 0, 1)
    return value


def _overlaps_itself(value: torch.Tensor) -> bool:
    """Whether two elements of ``value`` are one place in memory: written back element by
    element, a copy of it would not be the same tensor."""
    dims = sorted(
        (stride, size) for size, stride in zip(value.shape, value.stride(), strict=True) if size > 1
    )
    reach = 0
    for stride, size in dims:
        if stride <= reach:
            return True
        reach += (size - 1) * stride
    return False


def makes_tensors_from_nothing(gm: torch.fx.GraphModule) -> bool:
    """Whether a graph calls an op on no traced value (``arange``, ``full``): fx's plain tracing
    runs such a call once and keeps its result as a constant, which the compiler never sees."""
    return any(node.op == "call_function" and not node.all_input_nodes for node in gm.graph.nodes)


def _in_torch(module: str) -> bool:
    return module.split(".")[0] == "torch"


COMPACT = f"{EMBEDDED}.compact"
TRACING = f"{EMBEDDED}.tracing"
LAYOUT = f"{EMBEDDED}.layout"


@dataclass(frozen=True)
class _Code:
    """What a compact file embeds after the rule's functions (``code``), the imports that code
    needs beyond the file's own, and the file's last line: the check its failure needs, with the
    tracer and the compile its graph needs. ``traced``: the file carries the full form's tracer."""

    code: str
    imports: str
    last: str
    traced: bool


def _code(case: ReproCase) -> _Code:
    accuracy = case.kind == FailureKind.ACCURACY
    whole_stack = case.level == DYNAMO
    compile_graph = (
        "compile_whole_stack"
        if whole_stack
        else "compile_post_aot_visible"
        if visible_outputs(case.gm) is not None
        else "compile_post_aot"
    )
    functions = [
        "_load",
        "copies",
        "run",
        "references",
        *(["compile_post_aot"] if compile_graph == "compile_post_aot_visible" else []),
        compile_graph,
        "check_accuracy" if accuracy else "check_error",
    ]
    code = embedded_functions(LAYOUT, ["_laid_out"]) + "\n" + embedded_functions(COMPACT, functions)
    imports = ""
    traced = makes_tensors_from_nothing(case.gm) or bool(_in_place_operators(case.gm))
    if traced:
        tracer, imports = embedded_module(TRACING)
        code = tracer + "\n" + code
    trace = "_trace" if traced else "torch.fx.symbolic_trace"
    last = (
        f'if __name__ == "__main__": sys.exit({functions[-1]}({trace}, {compile_graph}))'
        "  # 1: reproduced, 0: fixed, 2: fails differently, 3: the repro cannot run"
    )
    return _Code(code, imports, last, traced)


def render_compact(
    case: ReproCase,
    header: Sequence[str],
    module_source: str,
    input_expressions: Sequence[str],
    footer: str = "",
) -> str:
    """The compact file of ``case`` (see :func:`compact_obstacle`): ``header`` its comment lines,
    ``module_source`` the graph's ``Repro`` class, ``input_expressions`` one per input, calling
    ``_load(values or tensor file, dtype, shape, stride, device[, storage offset])``; ``footer``
    comment lines after the code."""
    config = "\n".join(line for line in case.config_source.strip().splitlines() if line)
    devices = {value.device.type for value in case.inputs if isinstance(value, torch.Tensor)}
    precision = (
        "torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False  # fp32 as fp32\n"
        if "cuda" in devices
        else ""
    )
    code = _code(case)
    rule_functions = "\n".join(embedded_source(function) for function in RULE_FUNCTIONS[case.kind])
    graph_code = _strip_init(module_source).rstrip()
    return "\n".join(
        [
            *header,
            *_compact_imports(case, code, rule_functions, graph_code),
            "",
            *([config, ""] if config else []),
            precision + graph_code,
            "",
            _make_inputs(input_expressions),
            _compact_settings(case, code),
            "# --- only torch needed: the fp64 rule of pytest-torchcompile (PyTorch's same()), eager, fp64 and Inductor ---",
            rule_functions,
            code.code,
            code.last + footer,
        ]
    )


def _compact_imports(
    case: ReproCase, code: _Code, rule_functions: str, graph_code: str
) -> list[str]:
    """The compact file's imports, and the hook that makes an error of the file itself exit 3."""
    return [
        f"import {', '.join(_standard_modules_used(rule_functions, code.code))}, "
        "torch._inductor.compile_fx  # with it torch._inductor.config",
        *([code.imports] if code.imports else []),
        *(["import torch._functorch.config"] if case.level == DYNAMO else []),
        *(
            f"import {module}  # registers {', '.join(ops)}"
            for module, ops in _registering_modules(case).items()
        ),
        "sys.excepthook = lambda *error: (sys.__excepthook__(*error), os._exit(3))  # exit 3: the repro cannot run",
        *(["from torch import device"] if "device(" in graph_code else []),
    ]


def _make_inputs(input_expressions: Sequence[str]) -> str:
    """The compact file's ``make_inputs``: on one line where the inputs fit."""
    inputs = ", ".join(input_expressions)
    if len(inputs) < 80:
        return f"def make_inputs():\n    return [{inputs}]"
    return (
        "def make_inputs():\n    return [\n"
        + "".join(f"        {e},\n" for e in input_expressions)
        + "    ]"
    )


def _compact_settings(case: ReproCase, code: _Code) -> str:
    """The names the compact judging code reads, assigned on one line: what the kind of failure
    needs, the outputs the user sees, the in-place operators a torch-level graph calls."""
    accuracy = case.kind == FailureKind.ACCURACY
    written = mutated_inputs(case.gm, case.inputs) if accuracy else []
    settings_of: dict[str, Any] = (
        {
            "KIND": str(case.kind),
            "TOL": case.tol,
            "CHECK_NON_FLOAT": case.check_non_float,
            "WRITTEN_INPUTS": written,
        }
        if accuracy
        else {
            "KIND": str(case.kind),
            "EXPECTED_ERROR": case.expected_error,
            "ERROR_PATTERN": case.error_pattern,
            "WRITTEN_INPUTS": [],
        }
    )
    visible = visible_outputs(case.gm)
    if visible is not None:
        settings_of["VISIBLE_OUTPUTS"] = visible
    if code.traced:
        settings_of["IN_PLACE_OPERATORS"] = frozenset(_in_place_operators(case.gm))
    names, values = list(settings_of), list(settings_of.values())
    return (
        f"{', '.join(names)} = {', '.join(repr(value) for value in values)}"
        + ("  # judged after the outputs, as the graph left them" if written else "")
        + (
            "\nNON_FLOAT_FAILURE = True  # the failure is in integer or bool outputs"
            if accuracy and case.non_float_failure
            else ""
        )
    )


def _standard_modules_used(*sources: str) -> list[str]:
    """The modules of the standard library the compact code may use that ``sources`` name, and
    ``sys``, which every compact file uses."""
    names = {
        node.id
        for source in sources
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Name)
    }
    return [
        module
        for module in ("copy", "math", "os", "re", "sys")
        if module in names or module == "sys"
    ]


def _in_place_operators(gm: torch.fx.GraphModule) -> list[str]:
    """The item assignments and in-place operators a torch-level graph calls, by their names in
    ``operator`` (``setitem``, ``iadd``...)."""
    return sorted(_operators(gm) & (IN_PLACE_OPERATORS - {"delitem"}))


def _operators(gm: torch.fx.GraphModule) -> set[str]:
    """The functions of ``operator`` a graph calls, by name."""
    names = (operator_name(node.target) for node in gm.graph.nodes)
    return {name for name in names if name is not None}


def _registering_modules(case: ReproCase) -> dict[str, list[str]]:
    """The modules of torch that register ops of the graph which ``import torch`` does not."""
    modules: dict[str, list[str]] = {}
    for origin in case.required_ops():
        if origin.module is not None and _in_torch(origin.module):
            modules.setdefault(origin.module, []).append(origin.qualname)
    return modules


def _strip_init(module_source: str) -> str:
    """The graph's class without an ``__init__`` that only calls the base class's."""
    return re.sub(
        r"\n    def __init__\(self\):\n        super\(\).__init__\(\)\n", "", module_source
    )


def compact_disagreement(module: ModuleType, case: ReproCase) -> str | None:
    """How a loaded compact file would judge otherwise than the plugin: another graph, or other
    eager or fp64 values; None when it agrees. Nothing is compiled."""
    gm, inputs = compact_trace(module)(module.Repro()), module.make_inputs()
    if [node.target for node in gm.graph.nodes] != [node.target for node in case.gm.graph.nodes]:
        return "its graph traces to other ops"
    if not all(
        _same_layout(value, wanted) for value, wanted in zip(inputs, case.inputs, strict=True)
    ):
        return "its inputs are laid out otherwise"
    with torch.no_grad():
        eager, fp64 = module.references(gm, inputs)
        expected_eager, expected_fp64 = reference_outputs(
            case.gm, clone_values(case.inputs), mutated=mutated_inputs(case.gm, case.inputs)
        )
    if expected_fp64 is None:
        return "the graph has no fp64 reference"
    for name, got, expected in (("eager", eager, expected_eager), ("fp64", fp64, expected_fp64)):
        if len(got) != len(expected) or not all(
            _identical(a, b) for a, b in zip(got, expected, strict=True)
        ):
            return f"its {name} run gives other values than the plugin's"
    return None


def compact_trace(module: ModuleType) -> Callable[[torch.nn.Module], torch.fx.GraphModule]:
    """How a loaded repro file traces its graph: its own tracer (``_trace``, which a compact
    file carries where plain tracing would lose ops), else fx's plain one."""
    return getattr(module, "_trace", torch.fx.symbolic_trace)


def _same_layout(value: Any, wanted: Any) -> bool:
    if not isinstance(value, torch.Tensor) or not isinstance(wanted, torch.Tensor):
        return type(value) is type(wanted)
    return (value.shape, value.stride(), value.storage_offset(), value.dtype) == (
        wanted.shape,
        wanted.stride(),
        wanted.storage_offset(),
        wanted.dtype,
    )


def _identical(value: Any, wanted: Any) -> bool:
    if not isinstance(value, torch.Tensor) or not isinstance(wanted, torch.Tensor):
        return value is None and wanted is None
    return not changed(wanted, value)
