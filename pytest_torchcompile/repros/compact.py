"""The compact form of a minified repro: a file short enough to paste into a PyTorch issue.

The graph comes first, then its inputs and the Inductor config that differs from the defaults;
then the functions of the rule the failure needs (``judging/rule.py``) and the compile
(``compile_graph``), copied, and a short run of eager, fp64 and Inductor. It judges as the plugin
does. Inputs keep their size, stride and storage offset; what the graph writes into its inputs
is judged as its outputs are; ops that make a tensor from no input (``arange``, ``full``) stay ops
of the traced graph; a torch-level graph compiles through the whole stack, with its gradients in a
training call. A case it cannot express (random ops, memory no op writes, item deletion, inputs
that overlap themselves, a post-AOT graph's inputs that require grad, ops outside aten) keeps the
full form: :func:`compact_obstacle` says why. A compact file is loaded back before it is kept
(:func:`compact_disagreement`): its graph and references must be the plugin's.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
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
from pytest_torchcompile.judging.references import reference_outputs, unwritten_elements
from pytest_torchcompile.judging.seeding import draws_random
from pytest_torchcompile.repros.runtime import embedded_source
from pytest_torchcompile.torch_internals.graph_compile import VISIBLE_OUTPUTS_KEY, visible_outputs

RULE_FUNCTIONS: dict[str, tuple[Callable[..., Any], ...]] = {
    FailureKind.ACCURACY: (rule.leaf_verdict,),
    FailureKind.COMPILE_ERROR: (rule.error_signature, rule.normalized_error),
    FailureKind.RUNTIME_ERROR: (rule.error_signature, rule.normalized_error),
}

def compact_obstacle(case: ReproCase) -> str | None:
    """Why ``case`` needs the full form, or None."""
    if case.level not in (POST_AOT, DYNAMO):
        return f"a graph of level {case.level}"
    if "delitem" in _operators(case.gm):
        return "item deletion, which fx's tracing does not record"
    if case.kind not in RULE_FUNCTIONS:
        return f"a failure of kind {case.kind}"
    if any(origin.module is not None and not _in_torch(origin.module) for origin in case.required_ops()):
        return "ops that a module outside torch registers"
    if draws_random(case.gm):
        return "random ops, which the full form seeds alike"
    for value in case.inputs:
        if not isinstance(value, torch.Tensor):
            if not isinstance(value, bool | int | float):
                return f"an input of type {type(value).__name__}"
            continue
        if type(value) is not torch.Tensor or value.layout != torch.strided or value.is_quantized or value.is_complex():
            return "an input that is not a plain strided real tensor"
        if value.requires_grad and case.level != DYNAMO:
            return "inputs that require grad"
        if _overlaps_itself(_one_per_broadcast(value)):
            return "an input whose elements share memory other than by broadcasting"
    try:
        allocates_unwritten = unwritten_elements(case.gm, case.inputs) is not None
    except Exception:
        allocates_unwritten = False
    if allocates_unwritten:
        return "memory no op writes, which the full form leaves unjudged"
    return None


def _broadcasts(value: Any) -> bool:
    """Whether ``value`` is a tensor with a broadcast dimension (stride 0, more than one element):
    an expanded tensor, such as the gradient of a sum."""
    return isinstance(value, torch.Tensor) and any(
        stride == 0 and size > 1 for size, stride in zip(value.shape, value.stride(), strict=True))


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
    dims = sorted((stride, size) for size, stride in zip(value.shape, value.stride(), strict=True) if size > 1)
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


_LOAD = '''\
def _load(values, dtype, shape, stride, device, offset=0):  # laid out as the input was: compiled code may assume it
    values = torch.load(os.path.join(os.path.dirname(os.path.abspath(__file__)), "tensors", values + ".pt")) if isinstance(values, str) else values  # a file in tensors/
    out = torch.empty(offset + 1 + sum(max(n - 1, 0) * s for n, s in zip(shape, stride)), dtype=dtype, device=device)
    return out.as_strided(shape, stride, offset).copy_(torch.as_tensor(values).reshape(shape))
'''
_LOAD_BROADCAST = '''\
def _load(values, dtype, shape, stride, device, offset=0):  # laid out as the input was: compiled code may assume it
    values = torch.load(os.path.join(os.path.dirname(os.path.abspath(__file__)), "tensors", values + ".pt")) if isinstance(values, str) else values  # a file in tensors/
    out = torch.empty(offset + 1 + sum(max(n - 1, 0) * s for n, s in zip(shape, stride)), dtype=dtype, device=device).as_strided(shape, stride, offset)
    once = tuple(slice(0, 1) if s == 0 else slice(None) for s in stride)  # a broadcast dim (stride 0) holds one element
    out[once].copy_(torch.as_tensor(values).reshape(shape)[once])
    return out
'''
_COPIES = '''\
def copies(inputs, dtype=None): return [(x.to(dtype) if dtype and x.is_floating_point() else _load(x, x.dtype, x.shape, x.stride(), x.device, x.storage_offset())) if isinstance(x, torch.Tensor) else x for x in inputs]
def run(call, inputs, dtype=None): return [*call(list(args := copies(inputs, dtype))), *(args[i] for i in WRITTEN_INPUTS)]  # outputs, inputs written
'''
_COPIES_WITH_GRADIENTS = '''\
def copies(inputs, dtype=None):
    return [(x.detach().to(dtype) if dtype and x.is_floating_point() else _load(x.detach(), x.dtype, x.shape, x.stride(), x.device, x.storage_offset())).requires_grad_(x.requires_grad) if isinstance(x, torch.Tensor) else x for x in inputs]
def run(call, inputs, dtype=None):  # the outputs, the gradients of their sum by the inputs that require grad, the inputs written
    outputs = list(call(list(args := copies(inputs, dtype))))
    wrt, floating = [a for a in args if isinstance(a, torch.Tensor) and a.requires_grad], [o for o in outputs if isinstance(o, torch.Tensor) and o.requires_grad]
    grads = torch.autograd.grad(torch.stack([o.float().sum() for o in floating]).sum(), wrt, allow_unused=True) if floating else ()
    return [o.detach() if isinstance(o, torch.Tensor) else o for o in outputs] + [torch.zeros_like(a) if g is None else g for a, g in zip(wrt, grads)] + [args[i].detach() for i in WRITTEN_INPUTS]
'''
_REFERENCES = '''\
def references(gm, inputs):  # eager's outputs, and fp64's: inputs, constants and the dtypes ops name widened
    wide = copy.deepcopy(gm).double()
    for node in wide.graph.nodes:
        if node.target is not torch.ops.aten.view.dtype:
            node.args, node.kwargs = torch.fx.node.map_aggregate((node.args, node.kwargs), lambda a: torch.float64 if a in (torch.float16, torch.bfloat16, torch.float32) else a)
    wide.recompile()
'''
_REFERENCES_RETURN = "    return run(lambda args: gm(*args), inputs), run(lambda args: wide(*args), inputs, torch.float64)\n"
_REFERENCES_RETURN_DEFAULT_FP64 = '''\
    eager, _ = run(lambda args: gm(*args), inputs), torch.set_default_dtype(torch.float64)  # ops naming no dtype too
    try:
        return eager, run(lambda args: wide(*args), inputs, torch.float64)
    finally:
        torch.set_default_dtype(torch.float32)
'''

_TRACE = '''\
def trace(module):  # fx's symbolic trace, keeping ops that make a tensor from no input as ops, not constants
    tracer = torch.fx.Tracer()
'''
_TRACE_IN_PLACE = '''\
def trace(module):  # fx's symbolic trace, recording x[i] = v and x += v (plain tracing refuses one, rewrites the other)
    class Proxy(torch.fx.Proxy):
        def __setitem__(self, key, value):
            self.tracer.create_proxy("call_function", operator.setitem, (self, key, value), {})
IN_PLACE_LOOP    tracer = type("Tracer", (torch.fx.Tracer,), {"proxy": lambda self, node: Proxy(node, self)})()
'''
_IN_PLACE_LOOP = '''\
    for name in IN_PLACE_OPERATORS:
        setattr(Proxy, f"__{name}__", lambda self, other, op=getattr(operator, name): self.tracer.create_proxy("call_function", op, (self, other), {}))
'''
_TRACE_FACTORIES = '''\
    class Factories(torch.overrides.TorchFunctionMode):  # ops that make a tensor from no input stay ops, not constants
        def __torch_function__(self, func, types, args=(), kwargs=None):
            traced = any(isinstance(a, torch.fx.Proxy) for a in torch.utils._pytree.tree_leaves((args, kwargs)))
            made = func(*args, **(kwargs or {}))
            return made if traced or not isinstance(made, torch.Tensor) else tracer.create_proxy("call_function", func, args, kwargs or {})
    with Factories():
        return torch.fx.GraphModule(module, tracer.trace(module))
'''
_TRACE_PLAIN_END = "    return torch.fx.GraphModule(module, tracer.trace(module))\n"

_COMPILE_POST_AOT = "torch._inductor.compile_fx.compile_fx_inner(gm, copies(inputs))"
_COMPILE_WHOLE_STACK = "whole_stack(gm)"
_WHOLE_STACK = '''\
def whole_stack(gm):  # as torch.compile compiles a Dynamo graph: AOT autograd, decompositions, Inductor
    torch._functorch.config.enable_autograd_cache = False  # its key does not cover the decompositions
    return (lambda compiled: lambda args: compiled(*args))(torch.compile(gm, backend="inductor", fullgraph=True, dynamic=False))
'''

_ACCURACY_MAIN = '''\
def main():
    try:
        gm, inputs = TRACE(Repro()), make_inputs()
        eager, reference = references(gm, inputs)
    except Exception as error:
        return print("REPRO BROKEN:", repr(error)) or 3
    try:
        outputs, failed = run(COMPILE, inputs), False
    except Exception as error:
        return print("FAILS DIFFERENTLY:", repr(error)) or 2
    for index, (got, expected, wide) in enumerate(zip(outputs, eager, reference)):
        passed, rule, figures = leaf_verdict(got, expected, wide, TOL, CHECK_NON_FLOAT) if (
            got.shape, got.dtype) == (expected.shape, expected.dtype) else (False, f"metadata (compiled {tuple(got.shape)} {got.dtype})", ())
        failed |= not passed  # figures: rmse(compiled, fp64), rmse(eager, fp64), the ratio allowed
        print(f"out[{index}] {tuple(expected.shape)} {expected.dtype}: {rule}{'' if passed else ' FAIL'}", *(f"{f:.3e}" for f in figures))
    print("REPRODUCED" if failed else "PASS: the compiled graph matches the reference: the bug is fixed")
    return int(failed)
'''

_ERROR_MAIN = '''\
def main():
    try:
        gm, inputs = TRACE(Repro()), make_inputs()
        references(gm, inputs)
    except Exception as error:
        return print("REPRO BROKEN:", repr(error)) or 3
    failure = "compile_error"
    try:
        compiled = COMPILE
        failure = "runtime_error"
        run(compiled, inputs)
    except Exception as error:
        signature = error_signature(error)
        same = failure == KIND and bool(re.search(ERROR_PATTERN, signature) if ERROR_PATTERN else
                                        normalized_error(signature) == normalized_error(EXPECTED_ERROR or signature))
        print(failure, signature, "REPRODUCED" if same else "FAILS DIFFERENTLY from the recorded failure")
        return 1 if same else 2
    return print("PASS: the compiled graph runs: the bug is fixed") or 0
'''

_END = '''\

if __name__ == "__main__":
    sys.exit(main())  # 1: reproduced, 0: fixed, 2: fails differently, 3: the repro cannot run
'''


def _runtime(case: ReproCase) -> str:
    """The functions after the rule's: loading, copying and running, references, the trace and
    the compile its graph needs, ``main``."""
    factories, in_place = makes_tensors_from_nothing(case.gm), _in_place_operators(case.gm)
    whole_stack = case.level == DYNAMO
    main = (_ACCURACY_MAIN if case.kind == FailureKind.ACCURACY else _ERROR_MAIN).replace(
        "TRACE(Repro()), make_inputs()", "TRACE(Repro()), make_inputs()" + (
            f"; gm.graph.find_nodes(op='output')[0].meta[{VISIBLE_OUTPUTS_KEY!r}] = VISIBLE_OUTPUTS  # the outputs "
            "Inductor was told the user sees: it keeps their traced strides" if visible_outputs(case.gm) is not None
            else "")).replace(
        "TRACE(", "trace(" if factories or in_place else "torch.fx.symbolic_trace(").replace(
        "COMPILE", _COMPILE_WHOLE_STACK if whole_stack else _COMPILE_POST_AOT)
    trace = ""
    if factories or in_place:
        operators = tuple(name for name in in_place if name != "setitem")
        loop = _IN_PLACE_LOOP.replace("IN_PLACE_OPERATORS", repr(operators)) if operators else ""
        trace = ((_TRACE_IN_PLACE.replace("IN_PLACE_LOOP", loop) if in_place else _TRACE)
                 + (_TRACE_FACTORIES if factories else _TRACE_PLAIN_END))
    return "".join([
        _LOAD_BROADCAST if any(_broadcasts(value) for value in case.inputs) else _LOAD,
        _COPIES_WITH_GRADIENTS if whole_stack else _COPIES,
        _REFERENCES, _REFERENCES_RETURN_DEFAULT_FP64 if factories else _REFERENCES_RETURN,
        trace, _WHOLE_STACK if whole_stack else "", main, _END,
    ])


def render_compact(case: ReproCase, header: Sequence[str], module_source: str,
                   input_expressions: Sequence[str], footer: str = "") -> str:
    """The compact file of ``case`` (see :func:`compact_obstacle`): ``header`` its comment lines,
    ``module_source`` the graph's ``Repro`` class, ``input_expressions`` one per input, calling
    ``_load(values or tensor file, dtype, shape, stride, device[, storage offset])``; ``footer``
    comment lines after the code."""
    config = "\n".join(line for line in case.config_source.strip().splitlines() if line)
    devices = {value.device.type for value in case.inputs if isinstance(value, torch.Tensor)}
    precision = ("torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False  # fp32 as fp32\n"
                 if "cuda" in devices else "")
    written = mutated_inputs(case.gm, case.inputs) if case.kind == FailureKind.ACCURACY else []
    settings_of: dict[str, Any] = ({"KIND": str(case.kind), "TOL": case.tol, "CHECK_NON_FLOAT": case.check_non_float,
                                    "WRITTEN_INPUTS": written} if case.kind == FailureKind.ACCURACY else
                                   {"KIND": str(case.kind), "EXPECTED_ERROR": case.expected_error,
                                    "ERROR_PATTERN": case.error_pattern, "WRITTEN_INPUTS": []})
    visible = visible_outputs(case.gm)
    if visible is not None:
        settings_of["VISIBLE_OUTPUTS"] = visible  # one line in main marks them on the traced graph
    names, values = list(settings_of), list(settings_of.values())
    settings = (f"{', '.join(names)} = {', '.join(repr(value) for value in values)}"
                + ("  # judged after the outputs, as the graph left them" if written else "")
                + ("\nNON_FLOAT_FAILURE = True  # the failure is in integer or bool outputs"
                   if case.kind == FailureKind.ACCURACY and case.non_float_failure else ""))
    inputs = ", ".join(input_expressions)
    functions = [embedded_source(function) for function in RULE_FUNCTIONS[case.kind]]
    graph_code = _strip_init(module_source).rstrip()
    return "\n".join([
        *header,
        "import copy, math, operator, os, re, sys" if _in_place_operators(case.gm) else "import copy, math, os, re, sys",
        "import torch._inductor.compile_fx  # and with it torch._inductor.config",
        *(["import torch._functorch.config"] if case.level == DYNAMO else []),
        *(f"import {module}  # registers {', '.join(ops)}" for module, ops in _registering_modules(case).items()),
        "sys.excepthook = lambda *error: (sys.__excepthook__(*error), os._exit(3))  # exit 3: the repro cannot run",
        *(["from torch import device"] if "device(" in graph_code else []),
        "",
        *([config, ""] if config else []),
        precision + graph_code,
        "",
        f"def make_inputs():\n    return [{inputs}]" if len(inputs) < 80 else
        "def make_inputs():\n    return [\n" + "".join(f"        {e},\n" for e in input_expressions) + "    ]",
        "",
        settings,
        "# --- only torch needed: the fp64 rule of pytest-torchcompile (PyTorch's same()), eager, fp64 and Inductor ---",
        "\n".join(functions),
        _runtime(case) + footer,
    ])


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
    return re.sub(r"\n    def __init__\(self\):\n        super\(\).__init__\(\)\n", "", module_source)


def compact_disagreement(module: ModuleType, case: ReproCase) -> str | None:
    """How a loaded compact file would judge otherwise than the plugin: another graph, or other
    eager or fp64 values; None when it agrees. Nothing is compiled."""
    gm, inputs = compact_trace(module)(module.Repro()), module.make_inputs()
    if [node.target for node in gm.graph.nodes] != [node.target for node in case.gm.graph.nodes]:
        return "its graph traces to other ops"
    if not all(_same_layout(value, wanted) for value, wanted in zip(inputs, case.inputs, strict=True)):
        return "its inputs are laid out otherwise"
    with torch.no_grad():
        eager, fp64 = module.references(gm, inputs)
        expected_eager, expected_fp64 = reference_outputs(case.gm, clone_values(case.inputs),
                                                          mutated=mutated_inputs(case.gm, case.inputs))
    if expected_fp64 is None:
        return "the graph has no fp64 reference"
    for name, got, expected in (("eager", eager, expected_eager), ("fp64", fp64, expected_fp64)):
        if len(got) != len(expected) or not all(_identical(a, b) for a, b in zip(got, expected, strict=True)):
            return f"its {name} run gives other values than the plugin's"
    return None


def compact_trace(module: ModuleType) -> Callable[[torch.nn.Module], torch.fx.GraphModule]:
    """How a loaded repro file traces its graph: its own tracer (``trace``; the full form's
    ``_trace``), else fx's plain one."""
    return getattr(module, "_trace", None) or getattr(module, "trace", None) or torch.fx.symbolic_trace


def _same_layout(value: Any, wanted: Any) -> bool:
    if not isinstance(value, torch.Tensor) or not isinstance(wanted, torch.Tensor):
        return type(value) is type(wanted)
    return (value.shape, value.stride(), value.storage_offset(), value.dtype) == (
        wanted.shape, wanted.stride(), wanted.storage_offset(), wanted.dtype)


def _identical(value: Any, wanted: Any) -> bool:
    if not isinstance(value, torch.Tensor) or not isinstance(wanted, torch.Tensor):
        return value is None and wanted is None
    return not changed(wanted, value)
