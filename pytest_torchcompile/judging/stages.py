"""Which stage of the compiler stack introduces a minimal graph's failure.

The graph is run through successive stages, as PyTorch's CompilerBisector does, each judged by
the same rule as the failure itself: for a torch-level (Dynamo) graph, Dynamo alone (``eager``),
AOT autograd alone (``aot_eager``), AOT autograd with Inductor's decompositions
(``aot_eager_decomp_partition``), then Inductor; for a post-AOT graph (already decomposed) only
Inductor's stages remain. Within Inductor, a subsystem is to blame when switching it off cures
the failure: its graph passes (the bisector's subsystems, then each pass by name), fusion, the lowering of one op (Inductor then calls the aten op
instead), and within a lowered op its code generation when restoring a codegen config value or
leaving vectorisation out cures it. The graph is minimal, so this costs a few small compiles.
"""

from __future__ import annotations

import functools
import operator
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.fx

from pytest_torchcompile.common.kinds import FailureKind
from pytest_torchcompile.judging.capture import OP_NODES, private_copy
from pytest_torchcompile.judging.judge import (
    DYNAMO,
    POST_AOT,
    GraphVerdict,
    compile_graph,
    devices_of,
    judge_graph,
    judges_backward,
    same_failure,
)
from pytest_torchcompile.judging.mutation import mutated_inputs
from pytest_torchcompile.judging.references import reference_outputs
from pytest_torchcompile.torch_internals.bisector import (
    GRAPH_PASSES,
    bisector_config_changes,
    can_skip_subsystems,
    subsystems_skipped,
)
from pytest_torchcompile.torch_internals.compiling import compiler_for_backend
from pytest_torchcompile.torch_internals.config import (
    defaults_missing,
    inductor_config,
    inductor_config_default,
    inductor_config_has,
)
from pytest_torchcompile.torch_internals.ops import is_op_overload

LEVELS = (POST_AOT, DYNAMO)

CODEGEN_PREFIXES = {"cpp.": "C++", "triton.": "Triton"}
"""Inductor config namespaces that belong to one code generator."""


@dataclass(frozen=True)
class ExpectedFailure:
    """How the graph fails, as the case recorded it: the attribution looks for this failure."""

    kind: FailureKind = FailureKind.ACCURACY
    expected_error: str | None = None
    error_pattern: str | None = None

    @property
    def type_name(self) -> str:
        """``accuracy``, or the exception type of a compile or runtime error."""
        if self.kind == FailureKind.ACCURACY or not self.expected_error:
            return self.kind
        return self.expected_error.split(":", 1)[0]


@dataclass
class StageAttribution:
    """Where a failure appears. ``stage`` is a stable key (``aot_autograd``, ``decompositions``,
    ``inductor.post_grad_passes``, ``inductor.fusion``, ``inductor.lowering``,
    ``inductor.graph_pass``, ``inductor.codegen.cpp``, ``inductor.codegen.triton``,
    ``inductor.config``, ``inductor``,
    ...); ``culprits`` the ops, passes or config values it names; ``summary`` the sentence."""

    stage: str
    summary: str
    culprits: list[str] = field(default_factory=list)
    level: str = POST_AOT
    compiles: int = 0
    trail: list[str] = field(default_factory=list)
    """What each step found, in order (``aot_eager: passes``, ...)."""


Compiler = Callable[[torch.fx.GraphModule, Sequence[Any]], Callable[..., Any]]


class _Stages:
    """Judges the graph under one stage setting at a time and remembers what it tried."""

    def __init__(
        self,
        gm: torch.fx.GraphModule,
        inputs: list[Any],
        tol: float,
        failure: ExpectedFailure,
        check_non_float: bool,
        level: str,
    ) -> None:
        self.gm = gm
        self.inputs = inputs
        self.tol = tol
        self.failure = failure
        self.check_non_float = check_non_float
        self.level = level
        # As the minifier judged it: a torch-level graph of a training call, on its gradients too.
        self.references = reference_outputs(
            gm, inputs, judges_backward(level, inputs), mutated_inputs(gm, inputs)
        )
        self.compiles = 0
        self.trail: list[str] = []
        self.can_skip = can_skip_subsystems()

    def fails(
        self,
        step: str,
        compiler: Compiler = compile_graph,
        *,
        skip: Callable[[str, str, str], bool] | None = None,
        config: dict[str, Any] | None = None,
    ) -> bool:
        if skip is not None and not self.can_skip:
            self.trail.append(f"{step}: not tried (this torch cannot switch subsystems off)")
            return True
        verdict = self._judge(skip, config, compiler)
        failing = same_failure(
            verdict, self.failure.kind, self.failure.expected_error, self.failure.error_pattern
        )
        self.trail.append(f"{step}: {'fails' if failing else _outcome(verdict)}")
        return failing

    def passes(
        self,
        step: str,
        compiler: Compiler,
        *,
        skip: Callable[[str, str, str], bool] | None = None,
        config: dict[str, Any] | None = None,
    ) -> bool:
        """Whether the graph passes (not merely fails otherwise) under this setting."""
        if skip is not None and not self.can_skip:
            self.trail.append(f"{step}: not tried (this torch cannot switch subsystems off)")
            return False
        verdict = self._judge(skip, config, compiler)
        self.trail.append(f"{step}: {_outcome(verdict)}")
        return verdict.failure is None

    def _judge(
        self,
        skip: Callable[[str, str, str], bool] | None,
        config: dict[str, Any] | None,
        compiler: Compiler = compile_graph,
    ) -> GraphVerdict:
        with subsystems_skipped(skip or _skip_nothing), inductor_config(config):
            verdict = judge_graph(
                private_copy(self.gm),
                self.inputs,
                self.tol,
                self.check_non_float,
                self.references,
                compiler,
                self.level,
            )
        self.compiles += 1
        return verdict

    def fails_at_default(self, name: str, compiler: Compiler) -> bool:
        step = f"inductor with {name} at its default"
        if defaults_missing() is not None:
            self.trail.append(f"{step}: not tried (this torch keeps no config defaults)")
            return True
        return self.fails(step, compiler, config={name: inductor_config_default(name)})

    def result(self, stage: str, summary: str, culprits: Iterable[str] = ()) -> StageAttribution:
        if self.failure.kind != FailureKind.ACCURACY:
            summary = summary.replace("deviation", "the error", 1)
        return StageAttribution(
            stage, summary, list(culprits), self.level, self.compiles, self.trail
        )


def _skip_nothing(backend: str, subsystem: str, what: str) -> bool:
    return False


def _outcome(verdict: GraphVerdict) -> str:
    if verdict.failure is None:
        return "passes"
    return f"fails differently ({verdict.failure})"


class _Skipper:
    """Skips one subsystem (all of it, or only the parts named ``only``) and records the names
    of the parts it was asked about."""

    def __init__(self, backend: str, subsystem: str, only: set[str] | None = None) -> None:
        self.backend = backend
        self.subsystem = subsystem
        self.only = only
        self.seen: list[str] = []

    def __call__(self, backend: str, subsystem: str, what: str) -> bool:
        if (backend, subsystem) != (self.backend, self.subsystem):
            return False
        if what not in self.seen:
            self.seen.append(what)
        return self.only is None or what in self.only


def attribute_stage(
    gm: torch.fx.GraphModule,
    inputs: Sequence[Any],
    level: str,
    tol: float,
    failure: ExpectedFailure = ExpectedFailure(),
    *,
    check_non_float: bool = False,
    config: dict[str, Any] | None = None,
) -> StageAttribution:
    """The stage of the stack that introduces the failure of ``gm`` (which returns a tuple or
    list, as Dynamo's and AOT's graphs do) on ``inputs``.

    ``level`` is :data:`POST_AOT` or :data:`DYNAMO`; ``config`` the Inductor config values the
    case sets (they are active already; restoring a codegen one to its default is one of the
    steps). Runs in the calling process: call it where candidates are judged (the judging child).
    """
    if level not in LEVELS:
        raise ValueError(f"unknown graph level {level!r}: expected one of {LEVELS}")
    stages = _Stages(gm, list(inputs), tol, failure, check_non_float, level)
    if level == DYNAMO:
        found = _before_inductor(stages)
        if found is not None:
            return found
        compiler = compiler_for_backend("inductor")
        passes: tuple[str, ...] = ("pre_grad_passes", "joint_graph_passes", "post_grad_passes")
    else:
        compiler = compile_graph
        passes = ("post_grad_passes",)
    if not stages.fails("inductor", compiler):
        return stages.result("unreproduced", "the minimal graph no longer fails under Inductor")
    return _within_inductor(stages, compiler, passes, config or {})


def _before_inductor(stages: _Stages) -> StageAttribution | None:
    compiler = compiler_for_backend
    if stages.fails("eager", compiler("eager")):
        return stages.result("dynamo", "deviation appears in Dynamo's tracing (backend eager)")
    if stages.fails("aot_eager", compiler("aot_eager")):
        return stages.result(
            "aot_autograd", "deviation appears with AOT autograd alone (aot_eager)"
        )
    decomposing = compiler("aot_eager_decomp_partition")
    if not stages.fails("aot_eager_decomp_partition", decomposing):
        return None
    if not stages.can_skip:
        return stages.result(
            "decompositions",
            "deviation appears with decompositions or AOT autograd's "
            "partitioner (aot_eager_decomp_partition)",
        )
    everything = _Skipper("aot_eager_decomp_partition", "decomposition")
    if stages.fails(
        "aot_eager_decomp_partition without decompositions", decomposing, skip=everything
    ):
        return stages.result(
            "aot_autograd.partition",
            "deviation appears with AOT autograd's partitioner (aot_eager_decomp_partition)",
        )
    found = _culprit(
        stages, "aot_eager_decomp_partition without the decompositions of", decomposing, everything
    )
    if not found.named:
        return stages.result(
            "decompositions",
            f"deviation appears with decompositions; no one op's alone shown "
            f"at fault ({', '.join(_op_names([found.shown]))})",
        )
    return stages.result(
        "decompositions",
        "deviation appears with decompositions: " + ", ".join(_op_names(found.named)),
        _op_names(found.named),
    )


@dataclass(frozen=True)
class _Culprit:
    """What switching parts of a subsystem off showed: ``named``, the one part whose switching
    off alone cures the failure where no other part's alone does (else empty), and ``shown``,
    what was shown where no part is named."""

    named: list[str]
    shown: str = ""


_MOST_PARTS_TRIED_ALONE = 8
"""Beyond this many parts, the others are not each switched off alone (a minimal graph has few)."""


def _culprit(stages: _Stages, step: str, compiler: Compiler, everything: _Skipper) -> _Culprit:
    """The part of a subsystem whose switching off alone cures the failure (switching all of it
    off did), and no other part's alone does. The shortest prefix of the parts, in the order
    torch asked about them, whose switching off cures it is found by bisection as the compiler
    bisector does, in log2(parts) compiles; its last part is then switched off alone, and each
    other part alone, so that a part is named only where it alone is shown to be at fault."""
    parts = everything.seen
    failing = _curing_prefix(stages, step, compiler, everything)
    if failing == 0:
        return _Culprit([])
    last = parts[failing - 1]

    def cures(part: str) -> bool:
        return not stages.fails(
            f"{step} {part} alone",
            compiler,
            skip=_Skipper(everything.backend, everything.subsystem, {part}),
        )

    if failing > 1 and not cures(last):
        return _Culprit(
            [], f"switching off {parts[0]} .. {last} together removes it; {last} alone does not"
        )
    curing = _others_curing(parts, last, cures)
    if curing:
        return _Culprit(
            [], f"switching off {last} alone removes it, and so does {', '.join(curing)} alone"
        )
    return _Culprit([last])


def _others_curing(parts: list[str], last: str, cures: Callable[[str], bool]) -> list[str]:
    """The parts other than ``last`` whose switching off alone cures the failure too; none
    tried beyond :data:`_MOST_PARTS_TRIED_ALONE` parts."""
    if len(parts) > _MOST_PARTS_TRIED_ALONE:
        return []
    return [part for part in parts if part != last and cures(part)]


def _curing_prefix(stages: _Stages, step: str, compiler: Compiler, everything: _Skipper) -> int:
    """The length of the shortest prefix of the parts :func:`_culprit` weighs whose switching off
    cures the failure, found by bisection (0: none was needed, which a flaky failure gives)."""
    parts = everything.seen
    passing, failing = 0, len(parts)
    while failing - passing > 1:
        middle = (passing + failing) // 2
        skipped = parts[:middle]
        label = skipped[0] if middle == 1 else f"{skipped[0]} .. {skipped[-1]}"
        if stages.fails(
            f"{step} {label}",
            compiler,
            skip=_Skipper(everything.backend, everything.subsystem, set(skipped)),
        ):
            passing = middle
        else:
            failing = middle
    return failing


def _op_names(reprs: Iterable[str]) -> list[str]:
    """``<OpOverload(op='aten.native_layer_norm', overload='default')>`` (how torch names a
    decomposed op) -> ``aten.native_layer_norm``."""
    names = []
    for what in reprs:
        match = re.search(r"op='([^']+)', overload='([^']+)'", what)
        name = what if match is None else f"{match[1]}.{match[2]}"
        names.append(name.removesuffix(".default"))
    return names


def _within_inductor(
    stages: _Stages, compiler: Compiler, passes: Sequence[str], config: dict[str, Any]
) -> StageAttribution:
    finders = (
        functools.partial(_in_pass_subsystem, stages, compiler, passes),
        functools.partial(_graph_pass, stages, compiler),
        functools.partial(_in_fusion, stages, compiler),
        functools.partial(_in_lowerings, stages, compiler, config),
        functools.partial(_in_config, stages, compiler, config),
    )
    for finder in finders:
        found = finder()
        if found is not None:
            return found
    return stages.result(
        "inductor",
        "deviation appears in Inductor; no subsystem it can switch off "
        "(graph passes, fusion, lowerings, config) isolates it",
    )


def _in_pass_subsystem(
    stages: _Stages, compiler: Compiler, passes: Sequence[str]
) -> StageAttribution | None:
    """The first of Inductor's subsystems of graph passes whose switching off cures the failure,
    with the pass that alone does where one does (:func:`_culprit`); None where none cures it."""
    for subsystem in passes:
        everything = _Skipper("inductor", subsystem)
        if stages.fails(f"inductor without {subsystem}", compiler, skip=everything):
            continue
        culprit = _culprit(stages, "inductor without", compiler, everything)
        label = subsystem.replace("_", "-").replace("-passes", " passes")
        detail = (
            f": {', '.join(culprit.named)}"
            if culprit.named
            else f" ({culprit.shown}; no one pass alone shown at fault)"
            if culprit.shown
            else ""
        )
        return stages.result(
            f"inductor.{subsystem}",
            f"deviation appears in Inductor's {label}{detail}",
            culprit.named,
        )
    return None


def _in_fusion(stages: _Stages, compiler: Compiler) -> StageAttribution | None:
    """Inductor's fusion of kernels where keeping every op in a kernel of its own cures the
    failure of a graph of more than one op; else None."""
    if _op_count(stages.gm) > 1 and not stages.fails(
        "inductor without fusion", compiler, config={"max_fusion_size": 1}
    ):
        return stages.result(
            "inductor.fusion", "deviation appears when Inductor fuses its kernels (scheduler)"
        )
    return None


def _in_lowerings(
    stages: _Stages, compiler: Compiler, config: dict[str, Any]
) -> StageAttribution | None:
    """The lowering at fault where every op falling back to aten cures the failure; else None."""
    everything = _Skipper("inductor", "lowerings")
    if stages.fails("inductor with every op falling back to aten", compiler, skip=everything):
        return None
    return _lowered(stages, compiler, everything, config)


def _in_config(
    stages: _Stages, compiler: Compiler, config: dict[str, Any]
) -> StageAttribution | None:
    """The Inductor config whose default (one the case sets) or whose change (one the bisector
    tries) cures the failure; else None."""
    for name, value in _non_codegen_config(config):
        if not stages.fails_at_default(name, compiler):
            return stages.result(
                "inductor.config",
                f"deviation appears with Inductor config {name}={value!r}",
                [f"{name}={value!r}"],
            )
    for change in bisector_config_changes("inductor"):
        if not stages.fails(f"inductor with {_assignments(change)}", compiler, config=change):
            return stages.result(
                "inductor.config",
                f"deviation disappears with Inductor config {_assignments(change)}",
                [_assignments(change)],
            )
    return None


def _graph_pass(stages: _Stages, compiler: Compiler) -> StageAttribution | None:
    """The one graph pass, of any of Inductor's (``remove_noop_ops`` belongs to no subsystem the
    bisector switches), whose skipping alone makes the graph pass; None where there is none (or
    where skipping it breaks the compile instead, which is no cure). Where
    the installed torch has ``disabled_passes``, the pass is confirmed through it, so that the
    sentence names a switch the reader can flip."""
    everything = _Skipper("inductor", GRAPH_PASSES)
    if stages.fails("inductor without its graph passes", compiler, skip=everything):
        return None
    named = _culprit(stages, "inductor without the graph passes", compiler, everything).named
    if not named:
        return None
    name = named[0]
    if inductor_config_has("disabled_passes"):
        if not stages.passes(
            f"inductor with disabled_passes={name!r}", compiler, config={"disabled_passes": name}
        ):
            return None
        switch = f" (it goes with torch._inductor.config.disabled_passes = {name!r})"
    elif not stages.passes(
        f"inductor without the graph pass {name}",
        compiler,
        skip=_Skipper("inductor", GRAPH_PASSES, {name}),
    ):
        return None
    else:
        switch = ""
    return stages.result(
        "inductor.graph_pass", f"deviation appears in Inductor's graph pass {name}{switch}", [name]
    )


def _lowered(
    stages: _Stages, compiler: Compiler, everything: _Skipper, config: dict[str, Any]
) -> StageAttribution:
    """The failure goes when ops fall back to aten: name the op, then tell its lowering from the
    code generated for it."""
    found = _culprit(stages, "inductor with aten's", compiler, everything)
    if not found.named:
        return stages.result(
            "inductor.lowering",
            "deviation goes when Inductor's lowerings fall back to aten, "
            f"but no one op's alone is shown at fault ({found.shown})",
        )
    ops = ", ".join(dict.fromkeys(lowered_op(name, stages.gm) for name in found.named))
    generator = "C++" if not devices_of(stages.inputs) else "Triton"
    for name, value in config.items():
        prefix = _codegen_prefix(name)
        if prefix is None:
            continue
        if not stages.fails_at_default(name, compiler):
            language = CODEGEN_PREFIXES[prefix]
            return stages.result(
                f"inductor.codegen.{prefix.rstrip('.')}",
                f"deviation appears in Inductor's {language} codegen of {ops} ({name}={value!r})",
                [ops, f"{name}={value!r}"],
            )
    if generator == "C++" and not stages.fails(
        "inductor without vectorisation", compiler, config={"cpp.simdlen": 1}
    ):
        return stages.result(
            "inductor.codegen.cpp",
            f"deviation appears in Inductor's vectorised C++ codegen of {ops}",
            [ops],
        )
    return stages.result(
        "inductor.lowering", f"deviation appears in Inductor's lowering of {ops}", [ops]
    )


def lowered_op(node_name: str, gm: torch.fx.GraphModule) -> str:
    """The op of the node Inductor asked about lowering, by its name: a node of ``gm``, or one that
    Inductor's own passes made (``copy__default`` of a ``diagonal_scatter``), named as its op and
    what it was made from."""
    ops = {node.name: op_name(node.target) for node in gm.graph.nodes if node.op == "call_function"}
    if node_name in ops:
        return ops[node_name]
    made = re.sub(r"_default(_\d+)?$", "", node_name)
    return f"{made} (a node Inductor made of {', '.join(graph_ops(gm))})"


def op_name(target: Any) -> str:
    """``aten.relu`` for ``torch.ops.aten.relu.default``; ``torch.relu``, ``operator.add`` ..."""
    if is_op_overload(target):
        return str(target).removesuffix(".default")
    module = getattr(target, "__module__", None) or ""
    return qualified_op_name(module, getattr(target, "__name__", None) or str(target))


def qualified_op_name(module: str, name: str) -> str:
    """What :func:`op_name` calls the function ``name`` of ``module`` (a graph's code names it
    so too: ``torch._C._nn.gelu`` is ``torch.nn.functional.gelu``)."""
    module = {
        "torch._C._nn": "torch.nn.functional",
        "_operator": "operator",
        "torch._C._VariableFunctions": "torch",
    }.get(module, module)
    return f"{module}.{name}" if module else name


def graph_ops(gm: torch.fx.GraphModule) -> list[str]:
    """The distinct ops a graph calls, in order (the op part of a failure's signature)."""
    return list(
        dict.fromkeys(
            op_name(node.target)
            for node in gm.graph.nodes
            if node.op in OP_NODES and node.target is not operator.getitem
        )
    )


def _op_count(gm: torch.fx.GraphModule) -> int:
    return sum(1 for node in gm.graph.nodes if node.op == "call_function")


def _codegen_prefix(name: str) -> str | None:
    """The :data:`CODEGEN_PREFIXES` entry a config name starts with, None for other names."""
    return next((prefix for prefix in CODEGEN_PREFIXES if name.startswith(prefix)), None)


def _non_codegen_config(config: dict[str, Any]) -> list[tuple[str, Any]]:
    return [(name, value) for name, value in config.items() if _codegen_prefix(name) is None]


def _assignments(change: dict[str, Any]) -> str:
    return ", ".join(f"{name}={value!r}" for name, value in change.items())
