"""The code of a compact minified file (``repros.compact``), after the rule's functions.

Dense by design: a compact file is pasted into an issue and stays within the line count of
torch's own minified repro, so the formatter leaves this module as written (``pyproject.toml``).
Its functions are embedded by name (``repros.runtime.embedded_functions``), each file taking
those its case needs; where cases differ, the file's last line passes the variant
(``check_accuracy(trace, compile_post_aot)``) instead of the file carrying code of its own. The
full form's code serves here too: every file lays its inputs out with ``embedded.layout``'s
``_laid_out``, and one whose graph needs more than fx's plain tracing embeds the full form's
tracer (``embedded.tracing``).
"""

import copy
import os
import re
from typing import TYPE_CHECKING

import torch
import torch._functorch.config
import torch._inductor.compile_fx

if TYPE_CHECKING:
    from pytest_torchcompile.judging.rule import error_signature, leaf_verdict, normalized_error
    from pytest_torchcompile.repros.embedded.declared import (
        CHECK_NON_FLOAT,
        ERROR_PATTERN,
        EXPECTED_ERROR,
        KIND,
        TOL,
        VISIBLE_OUTPUTS,
        Repro,
        make_inputs,
    )
    from pytest_torchcompile.repros.embedded.declared_compact import WRITTEN_INPUTS
    from pytest_torchcompile.repros.embedded.layout import _laid_out


def _load(values, dtype, shape, stride, device, offset=0): return _laid_out(torch.load(os.path.join(os.path.dirname(os.path.abspath(__file__)), "tensors", values + ".pt"), weights_only=True) if isinstance(values, str) else torch.as_tensor(values), dtype, shape, stride, device, offset)  # values inline or a file in tensors/


def copies(inputs, dtype=None): return [(x.detach().to(dtype) if dtype and x.is_floating_point() else _load(x.detach(), x.dtype, x.shape, x.stride(), x.device, x.storage_offset())).requires_grad_(x.requires_grad) if isinstance(x, torch.Tensor) else x for x in inputs]
def run(call, inputs, dtype=None):  # the outputs, the gradients of their sum by the inputs that require grad (a training graph), the inputs written
    outputs, wrt = list(call(list(args := copies(inputs, dtype)))), [a for a in args if isinstance(a, torch.Tensor) and a.requires_grad]
    grads = torch.autograd.grad(torch.stack(floating).sum(), wrt, allow_unused=True) if wrt and (floating := [o.float().sum() for o in outputs if isinstance(o, torch.Tensor) and o.requires_grad]) else ()
    return [o.detach() if isinstance(o, torch.Tensor) else o for o in outputs] + [torch.zeros_like(a) if g is None else g for a, g in zip(wrt, grads)] + [args[i].detach() for i in WRITTEN_INPUTS]


def references(gm, inputs):  # eager's outputs, and fp64's: inputs, constants, the default dtype and the dtypes ops name widened
    wide = copy.deepcopy(gm).double()
    for node in wide.graph.nodes:
        if node.target is not torch.ops.aten.view.dtype:
            node.args, node.kwargs = torch.fx.node.map_aggregate((node.args, node.kwargs), lambda a: torch.float64 if a in (torch.float16, torch.bfloat16, torch.float32) else a)
    wide.recompile()
    try: return run(lambda args: gm(*args), inputs), (torch.set_default_dtype(torch.float64), run(lambda args: wide(*args), inputs, torch.float64))[1]
    finally: torch.set_default_dtype(torch.float32)


def compile_post_aot(gm, inputs): return torch._inductor.compile_fx.compile_fx_inner(gm, copies(inputs))
def compile_post_aot_visible(gm, inputs):  # Inductor told which outputs the user sees: they keep their traced strides
    gm.graph.find_nodes(op="output")[0].meta["user_visible_output_idxs"] = VISIBLE_OUTPUTS
    return compile_post_aot(gm, inputs)


def compile_whole_stack(gm, inputs):  # as torch.compile compiles a Dynamo graph: AOT autograd, decompositions, Inductor
    torch._functorch.config.enable_autograd_cache = False  # its key does not cover the decompositions
    return (lambda compiled: lambda args: compiled(*args))(torch.compile(gm, backend="inductor", fullgraph=True, dynamic=False))


# Rules compared as plain strings: a compact file carries no common/leaves.py, whose LeafRule
# equals its string.
def check_accuracy(trace, compile_graph):
    try: eager, reference = references(gm := trace(Repro()), inputs := make_inputs())
    except Exception as error: return print("REPRO BROKEN:", repr(error)) or 3
    try: outputs, failed = run(compile_graph(gm, inputs), inputs), False
    except Exception as error: return print("FAILS DIFFERENTLY:", repr(error)) or 2
    for index, (got, expected, wide) in enumerate(zip(outputs, eager, reference)):
        passed, rule, figures = leaf_verdict(got, expected, wide, TOL, CHECK_NON_FLOAT) if (
            got.shape, got.dtype) == (expected.shape, expected.dtype) else (False, f"metadata (compiled {tuple(got.shape)} {got.dtype})", ())
        failed |= not passed  # figures, each named: the fp64 rule's two errors (or counts of elements unlike fp64's) and its multiplier, or a cosine
        names = ("compiled unlike fp64", "eager unlike fp64", "multiplier") if rule == "exact" else ("rmse(compiled,fp64)", "rmse(eager,fp64)", "multiplier") if len(figures) == 3 else ("cosine",)
        print(f"out[{index}] {tuple(expected.shape)} {expected.dtype}: {rule}{'' if passed else ' FAIL'}", *(f"{n} {f:.3g}" if rule == "exact" or n == "multiplier" else f"{n} {f:.3e}" for n, f in zip(names, figures)))
    print("REPRODUCED" if failed else "PASS: the compiled graph matches the reference: the bug is fixed")
    return int(failed)


def check_error(trace, compile_graph):
    try:
        gm, inputs = trace(Repro()), make_inputs()
        references(gm, inputs)
    except Exception as error:
        return print("REPRO BROKEN:", repr(error)) or 3
    failure = "compile_error"
    try:
        compiled = compile_graph(gm, inputs)
        failure = "runtime_error"
        run(compiled, inputs)
    except Exception as error:
        signature = error_signature(error)
        same = failure == KIND and bool(re.search(ERROR_PATTERN, signature) if ERROR_PATTERN else
                                        normalized_error(signature) == normalized_error(EXPECTED_ERROR or signature))
        print(failure, signature, "REPRODUCED" if same else "FAILS DIFFERENTLY from the recorded failure")
        return 1 if same else 2
    return print("PASS: the compiled graph runs: the bug is fixed") or 0
