"""Run a model eagerly, in fp64 and compiled, and turn the three results into a verdict."""

from __future__ import annotations

import copy
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.fx

from . import _torch_compat
from .capture import CapturedGraph, GraphCapture, clone_inputs
from .oracle import (
    DEFAULT_TOLERANCE,
    Comparison,
    LeafResult,
    Status,
    compare_outputs,
    outputs_agree,
)


@dataclass(frozen=True)
class CheckOptions:
    """Everything that decides how one model is checked (merged from call, marker, CLI and ini)."""

    tol: float = DEFAULT_TOLERANCE
    backend: str = "inductor"
    mode: str | None = None
    inductor_config: dict[str, Any] = field(default_factory=dict)
    check_non_float: bool = True
    seed: int = 0
    dynamic: bool | None = None
    fullgraph: bool = False


@dataclass
class CheckOutcome:
    status: Status
    message: str
    comparison: Comparison | None = None
    reference: str = "fp64"
    graphs: list[CapturedGraph] = field(default_factory=list)
    failing_graphs: list[CapturedGraph] = field(default_factory=list)
    compile_seconds: float | None = None
    compiled_output: Any = None
    error: BaseException | None = None

    @property
    def passed(self) -> bool:
        return self.status in (Status.PASS, Status.NO_FP64_REFERENCE)


def _clone_tree(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return value.detach().clone().requires_grad_(value.requires_grad)
    if isinstance(value, (list, tuple)) and not hasattr(value, "_fields"):
        return type(value)(_clone_tree(v) for v in value)
    if isinstance(value, dict):
        return type(value)((k, _clone_tree(v)) for k, v in value.items())
    return copy.deepcopy(value)


def _to_fp64(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        if value.is_floating_point():
            return value.detach().to(torch.float64).requires_grad_(value.requires_grad)
        if value.is_complex():
            return value.detach().to(torch.complex128)
        return value.detach().clone()
    if isinstance(value, (list, tuple)) and not hasattr(value, "_fields"):
        return type(value)(_to_fp64(v) for v in value)
    if isinstance(value, dict):
        return type(value)((k, _to_fp64(v)) for k, v in value.items())
    return value


def _copy_callable(fn: Callable[..., Any], fp64: bool = False) -> Callable[..., Any]:
    """A deep copy of a module (cast to fp64 on request); plain functions are used as they are."""
    if isinstance(fn, torch.nn.Module):
        module = copy.deepcopy(fn)
        return module.to(torch.float64) if fp64 else module
    return fn


def _short_error(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    first = text[0] if text else ""
    return f"{type(error).__name__}: {first[:300]}"


class EagerRunError(Exception):
    """The model raised when run eagerly: a defect of the test, not of the compiler."""


def _run(fn: Callable[..., Any], args: Sequence[Any], kwargs: dict[str, Any]) -> tuple[Any, list[Any]]:
    """Call on clones; return the output and the arguments as the call left them (mutations)."""
    call_args = [_clone_tree(a) for a in args]
    call_kwargs = {k: _clone_tree(v) for k, v in kwargs.items()}
    output = fn(*call_args, **call_kwargs)
    return output, call_args


def _mutated_positions(original: Sequence[Any], after: Sequence[Any]) -> list[int]:
    """Positions of the tensor arguments that the eager call changed in place."""
    return [
        index for index, (before, now) in enumerate(zip(original, after, strict=True))
        if isinstance(before, torch.Tensor) and isinstance(now, torch.Tensor)
        and (before.shape != now.shape or not torch.equal(before.detach(), now.detach()))
    ]


def _with_mutations(output: Any, call_args: Sequence[Any], positions: list[int]) -> tuple[Any, dict[str, Any]]:
    """What a call produced: its output, plus the arguments it mutated (those must match too)."""
    return output, {f"args[{i}] (mutated in place)": call_args[i] for i in positions}


def check_model(
    fn: Callable[..., Any],
    args: Sequence[Any],
    kwargs: dict[str, Any] | None = None,
    options: CheckOptions | None = None,
) -> CheckOutcome:
    """Check ``fn(*args, **kwargs)`` compiled by Inductor against eager and an fp64 reference.

    The caller's model and tensors are never mutated: every run works on copies.
    """
    options = options or CheckOptions()
    kwargs = kwargs or {}

    torch.manual_seed(options.seed)
    try:
        eager_out, eager_args = _run(_copy_callable(fn), args, kwargs)
        eager_again, _ = _run(_copy_callable(fn), args, kwargs)
    except Exception as error:
        raise EagerRunError(f"the model raised when run eagerly: {_short_error(error)}") from error
    mutated = _mutated_positions(args, eager_args)

    if not outputs_agree(eager_out, eager_again, options.tol):
        return CheckOutcome(
            Status.EAGER_NONDETERMINISTIC,
            "eager disagrees with itself across two runs (random ops such as dropout in train mode, "
            "or nondeterministic kernels), so no compiled result can be judged; make the model "
            "deterministic (e.g. model.eval()) to check it",
        )

    reference: Any | None
    reference_label = "fp64"
    torch.manual_seed(options.seed)
    try:
        with _torch_compat.float64_everywhere():
            reference_out, reference_args = _run(
                _copy_callable(fn, fp64=True), [_to_fp64(a) for a in args],
                {k: _to_fp64(v) for k, v in kwargs.items()},
            )
        reference = _with_mutations(reference_out, reference_args, mutated)
    except Exception as error:
        reference = None
        reference_label = f"same-precision cosine check: the model cannot run in fp64 ({_short_error(error)})"

    capture = GraphCapture()
    torch.manual_seed(options.seed)
    _torch_compat.reset()
    started = time.perf_counter()
    compiled_fn = _copy_callable(fn)
    try:
        with _torch_compat.inductor_config(options.inductor_config), _torch_compat.no_compile_caches(), \
                _torch_compat.strict_dynamo():
            backend = capture.backend(options.mode) if options.backend == "inductor" else options.backend
            compiled = torch.compile(compiled_fn, backend=backend, dynamic=options.dynamic,
                                     fullgraph=options.fullgraph)
            compiled_out, compiled_args = _run(compiled, args, kwargs)
    except Exception as error:
        return _compiler_error_outcome(error, capture.graphs, time.perf_counter() - started)
    finally:
        _torch_compat.reset()
    elapsed = time.perf_counter() - started

    comparison = compare_outputs(
        _with_mutations(compiled_out, compiled_args, mutated), _with_mutations(eager_out, eager_args, mutated),
        reference, options.tol, options.check_non_float,
    )
    comparison = _rename_root(comparison)
    if comparison.passed:
        status = Status.PASS if reference is not None else Status.NO_FP64_REFERENCE
        return CheckOutcome(status, "", comparison, reference_label, capture.graphs,
                            compile_seconds=elapsed, compiled_output=compiled_out)
    failing = _failing_graphs(capture.graphs, options)
    return CheckOutcome(
        Status.FAIL_ACCURACY,
        comparison.structure_error or f"{len(comparison.failing)} of {len(comparison.leaves)} outputs "
        f"deviate beyond the {'fp64 rule' if reference is not None else 'cosine check'}",
        comparison, reference_label, capture.graphs, failing, elapsed, compiled_out,
    )


def _rename_root(comparison: Comparison) -> Comparison:
    """Paths of the (output, mutated-arguments) pair read as ``out...`` and ``args[i] ...``."""
    renamed = []
    for leaf in comparison.leaves:
        path = leaf.path
        if path.startswith("out[0]"):
            path = "out" + path[len("out[0]"):]
        elif path.startswith("out[1]["):
            path = path[len("out[1]['"):-2]
        renamed.append(LeafResult(**{**leaf.__dict__, "path": path}))
    return Comparison(renamed, comparison.structure_error)


def _compiler_error_outcome(error: BaseException, graphs: list[CapturedGraph], elapsed: float) -> CheckOutcome:
    compile_failed = [g for g in graphs if g.compile_error is not None]
    if compile_failed:
        return CheckOutcome(Status.FAIL_COMPILE, f"Inductor failed to compile {compile_failed[0].label}: "
                            f"{_short_error(compile_failed[0].compile_error or error)}",
                            graphs=graphs, failing_graphs=compile_failed[:1], compile_seconds=elapsed, error=error)
    run_failed = [g for g in graphs if g.runtime_error is not None]
    if run_failed:
        return CheckOutcome(Status.FAIL_RUNTIME, f"compiled code raised in {run_failed[0].label}: "
                            f"{_short_error(run_failed[0].runtime_error or error)}",
                            graphs=graphs, failing_graphs=run_failed[:1], compile_seconds=elapsed, error=error)
    where = "".join(traceback.format_exception_only(error)).strip().splitlines()[0]
    return CheckOutcome(Status.FAIL_COMPILE, f"torch.compile raised before Inductor lowered a graph: {where}",
                        graphs=graphs, compile_seconds=elapsed, error=error)


# --- one graph at a time -------------------------------------------------------------------


@dataclass(frozen=True)
class GraphReference:
    """Eager results of one post-AOT graph on its real inputs: in the original dtype and in fp64."""

    eager: list[Any]
    fp64: list[Any] | None


def run_graph(gm: torch.fx.GraphModule, inputs: Sequence[Any], fp64: bool = False) -> list[Any]:
    values = clone_inputs(inputs)
    with torch.no_grad():
        if fp64:
            values = [_to_fp64(v) for v in values]
            with _torch_compat.float64_everywhere():
                return list(gm(*values))
        return list(gm(*values))


def graph_reference(gm: torch.fx.GraphModule, inputs: Sequence[Any]) -> GraphReference:
    eager = run_graph(gm, inputs)
    try:
        fp64: list[Any] | None = run_graph(gm, inputs, fp64=True)
    except Exception:
        fp64 = None
    return GraphReference(eager, fp64)


def compare_graph_outputs(
    compiled: Sequence[Any], reference: GraphReference, tol: float, check_non_float: bool = True,
) -> Comparison:
    comparison = compare_outputs(list(compiled), reference.eager, reference.fp64, tol, check_non_float)
    return Comparison(
        [LeafResult(**{**leaf.__dict__, "path": leaf.path.replace("out[", "graph_out[", 1)})
         for leaf in comparison.leaves],
        comparison.structure_error,
    )


def graph_has_random_ops(gm: torch.fx.GraphModule) -> bool:
    return any(node.op == "call_function" and _torch_compat.is_random_op(node.target) for node in gm.graph.nodes)


def _failing_graphs(graphs: list[CapturedGraph], options: CheckOptions) -> list[CapturedGraph]:
    """The captured graphs that fail on their own, worst first; all of them when none does alone
    (the deviation then builds up across graph breaks)."""
    scored: list[tuple[float, CapturedGraph]] = []
    for graph in graphs:
        inputs = graph.runtime_inputs
        if graph.compiled is None or inputs is None or graph_has_random_ops(graph.gm):
            continue
        reference = graph_reference(graph.gm, inputs)
        with torch.no_grad():
            outputs = graph.compiled(clone_inputs(inputs))
        comparison = compare_graph_outputs(outputs, reference, options.tol, options.check_non_float)
        if not comparison.passed:
            scored.append((comparison.worst_ratio or float("inf"), graph))
    if not scored:
        return [g for g in graphs if g.runtime_inputs is not None]
    return [graph for _, graph in sorted(scored, key=lambda item: -item[0])]
