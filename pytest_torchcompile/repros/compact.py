"""The compact form of a minified repro: a file short enough to paste into a PyTorch issue.

The graph comes first, then its inputs and the Inductor config that differs from the defaults;
then the functions of the rule the failure needs (``judging/rule.py``) and the compile
(``compile_graph``), copied, and a short run of eager, fp64 and Inductor. It judges as the plugin
does. A case it cannot express (a torch-level graph, random ops, memory no op writes, inputs that
share memory or require grad, ops outside aten) keeps the full form: :func:`compact_obstacle`
says why. A compact file is loaded back before it is kept (:func:`compact_disagreement`): its
graph and references must be the plugin's.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Any

import torch

from pytest_torchcompile.judging import rule
from pytest_torchcompile.judging.case import ReproCase
from pytest_torchcompile.judging.judge import (
    ACCURACY,
    COMPILE_ERROR,
    POST_AOT,
    RUNTIME_ERROR,
    changed,
    clone_values,
    draws_random,
    mutated_inputs,
    reference_outputs,
    unwritten_elements,
)
from pytest_torchcompile.repros.runtime import embedded_source

RULE_FUNCTIONS: dict[str, tuple[Callable[..., Any], ...]] = {
    ACCURACY: (rule.leaf_verdict,),
    COMPILE_ERROR: (rule.error_signature, rule.normalized_error),
    RUNTIME_ERROR: (rule.error_signature, rule.normalized_error),
}

def compact_obstacle(case: ReproCase) -> str | None:
    """Why ``case`` needs the full form, or None."""
    if case.level != POST_AOT:
        return "a torch-level graph, compiled through the whole stack"
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
        if value.requires_grad:
            return "inputs that require grad"
        if value.storage_offset() or value.clone().stride() != value.stride():
            return "an input laid out with gaps, overlaps or an offset in its storage"
    try:
        allocates_unwritten = unwritten_elements(case.gm, case.inputs) is not None
        writes_inputs = bool(mutated_inputs(case.gm, case.inputs))
    except Exception:
        allocates_unwritten = writes_inputs = False
    if allocates_unwritten:
        return "memory no op writes, which the full form leaves unjudged"
    if writes_inputs:
        return "a graph that writes into its inputs, which the full form judges as outputs"
    return None


def _in_torch(module: str) -> bool:
    return module.split(".")[0] == "torch"


_RUNTIME = '''\
def _load(values, dtype, shape, stride, device):  # inline values, or a file in tensors/ beside this one
    if isinstance(values, str):
        values = torch.load(os.path.join(os.path.dirname(os.path.abspath(__file__)), "tensors", values + ".pt"))
    return torch.empty_strided(shape, stride, dtype=dtype, device=device).copy_(torch.as_tensor(values).reshape(shape))
def copies(inputs, dtype=None):
    return [(x.to(dtype) if dtype and x.is_floating_point() else x.clone()) if isinstance(x, torch.Tensor) else x for x in inputs]
def references(gm, inputs):  # eager's outputs, and fp64's: inputs, constants and the dtypes ops name widened
    wide = copy.deepcopy(gm).double()
    for node in wide.graph.nodes:
        if node.target is not torch.ops.aten.view.dtype:
            node.args, node.kwargs = torch.fx.node.map_aggregate((node.args, node.kwargs), lambda a: torch.float64 if a in (torch.float16, torch.bfloat16, torch.float32) else a)
    wide.recompile()
    return gm(*copies(inputs)), wide(*copies(inputs, torch.float64))
'''

_ACCURACY_MAIN = '''\
def main():
    try:
        gm, inputs = torch.fx.symbolic_trace(Repro()), make_inputs()
        eager, reference = references(gm, inputs)
    except Exception as error:
        return print("REPRO BROKEN:", repr(error)) or 3
    try:
        outputs, failed = torch._inductor.compile_fx.compile_fx_inner(gm, copies(inputs))(copies(inputs)), False
    except Exception as error:
        return print("FAILS DIFFERENTLY:", repr(error)) or 2
    for index, (got, expected, wide) in enumerate(zip(outputs, eager, reference)):
        passed, rule, figures = leaf_verdict(got, expected, wide, TOL, CHECK_NON_FLOAT) if (
            got.shape, got.dtype) == (expected.shape, expected.dtype) else (False, "metadata", ())
        failed |= not passed  # figures: rmse(compiled, fp64), rmse(eager, fp64), the ratio allowed
        print(f"out[{index}] {tuple(expected.shape)} {expected.dtype}: {rule}{'' if passed else ' FAIL'}", *(f"{f:.3e}" for f in figures))
    print("REPRODUCED" if failed else "PASS: the compiled graph matches the reference: the bug is fixed")
    return int(failed)
'''

_ERROR_MAIN = '''\
def main():
    try:
        gm, inputs = torch.fx.symbolic_trace(Repro()), make_inputs()
        references(gm, inputs)
    except Exception as error:
        return print("REPRO BROKEN:", repr(error)) or 3
    failure = "compile_error"
    try:
        compiled = torch._inductor.compile_fx.compile_fx_inner(gm, copies(inputs))
        failure = "runtime_error"
        compiled(copies(inputs))
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


def render_compact(case: ReproCase, header: Sequence[str], module_source: str,
                   input_expressions: Sequence[str]) -> str:
    """The compact file of ``case`` (see :func:`compact_obstacle`): ``header`` its comment lines,
    ``module_source`` the graph's ``Repro`` class, ``input_expressions`` one per input, calling
    ``_load(values or tensor file, dtype, shape, stride, device)``."""
    config = "\n".join(line for line in case.config_source.strip().splitlines() if line)
    devices = {value.device.type for value in case.inputs if isinstance(value, torch.Tensor)}
    precision = ("torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False  # fp32 as fp32\n"
                 if "cuda" in devices else "")
    settings = (f"KIND, TOL, CHECK_NON_FLOAT = {case.kind!r}, {case.tol!r}, {case.check_non_float!r}"
                + ("\nNON_FLOAT_FAILURE = True  # the failure is in integer or bool outputs" if case.non_float_failure
                   else "")
                if case.kind == ACCURACY else
                f"KIND, EXPECTED_ERROR, ERROR_PATTERN = {case.kind!r}, {case.expected_error!r}, {case.error_pattern!r}")
    inputs = ", ".join(input_expressions)
    functions = [embedded_source(function) for function in RULE_FUNCTIONS[case.kind]]
    graph_code = _strip_init(module_source).rstrip()
    return "\n".join([
        *header,
        "import copy, math, os, re, sys",
        "import torch._inductor.compile_fx  # and with it torch._inductor.config",
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
        _RUNTIME + (_ACCURACY_MAIN if case.kind == ACCURACY else _ERROR_MAIN) + _END,
    ])


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
    gm, inputs = module.torch.fx.symbolic_trace(module.Repro()), module.make_inputs()
    if [node.target for node in gm.graph.nodes] != [node.target for node in case.gm.graph.nodes]:
        return "its graph traces to other ops"
    with torch.no_grad():
        eager, fp64 = module.references(gm, inputs)
        expected_eager, expected_fp64 = reference_outputs(case.gm, clone_values(case.inputs))
    if expected_fp64 is None:
        return "the graph has no fp64 reference"
    for name, got, expected in (("eager", eager, expected_eager), ("fp64", fp64, expected_fp64)):
        if len(got) != len(expected) or not all(_identical(a, b) for a, b in zip(got, expected, strict=True)):
            return f"its {name} run gives other values than the plugin's"
    return None


def _identical(value: Any, wanted: Any) -> bool:
    if not isinstance(value, torch.Tensor) or not isinstance(wanted, torch.Tensor):
        return value is None and wanted is None
    return not changed(wanted, value)
