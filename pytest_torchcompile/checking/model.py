"""Run a model eagerly, in fp64 and compiled, and turn the three results into a verdict."""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import functools
import math
import time
import traceback
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.fx

from pytest_torchcompile.checking.aside import aside
from pytest_torchcompile.checking.masked import (
    ConcurrentProbes,
    MaskedDivergence,
    ProbeChildren,
    device_of,
    find_masked_divergence,
)
from pytest_torchcompile.common.kinds import FailureKind
from pytest_torchcompile.common.leaves import LeafResult
from pytest_torchcompile.common.settings import CheckOptions
from pytest_torchcompile.common.verdict import Comparison, Status, out_of_memory
from pytest_torchcompile.judging.capture import CapturedGraph, DynamoGraph, GraphCapture
from pytest_torchcompile.judging.conditioning import conditioned, judged_discontinuous
from pytest_torchcompile.judging.conditioning import nudged as nudged_value
from pytest_torchcompile.judging.copies import clone_values, strided_copy, widened
from pytest_torchcompile.judging.isolation.config import config_patches
from pytest_torchcompile.judging.judge import (
    DYNAMO,
    compare_graph_outputs,
    error_signature,
    judge_graph,
)
from pytest_torchcompile.judging.mutation import changed, mutated_inputs
from pytest_torchcompile.judging.oracle import (
    compare_outputs,
    differing_leaves,
    first_disagreement,
    flatten_outputs,
)
from pytest_torchcompile.judging.precision import full_fp32_precision
from pytest_torchcompile.judging.references import (
    UNLIKE_FILLS,
    holds_nan,
    reference_outputs,
    unwritten_elements,
)
from pytest_torchcompile.judging.reordering import (
    DECOMPOSED_CAP,
    Arguments,
    capped,
    channels_last,
    noise_floors,
    raise_floors,
    reversed_batch,
)
from pytest_torchcompile.judging.seeding import rng_states
from pytest_torchcompile.torch_internals.compiling import no_compile_caches, reset, strict_dynamo
from pytest_torchcompile.torch_internals.config import inductor_config
from pytest_torchcompile.torch_internals.decomposed import decomposed, decomposed_missing
from pytest_torchcompile.torch_internals.environment import (
    ENVIRONMENT_NOT_JUDGED,
    environment_failure,
)
from pytest_torchcompile.torch_internals.fp64 import float64_everywhere
from pytest_torchcompile.torch_internals.nan_gradients import nan_gradients_filled
from pytest_torchcompile.torch_internals.random_ops import generator_state_outputs
from pytest_torchcompile.torch_internals.rng import (
    EAGER_RNG_CONFIG,
    RandomDrawMismatch,
    recording_random_draws,
    replaying_random_draws,
)
from pytest_torchcompile.torch_internals.unwritten import filling_unwritten
from pytest_torchcompile.torch_internals.values import tree_map


@dataclass
class FailingGraph:
    """A captured graph that fails, the inputs it fails on, and (for a masked deviation) the cut
    of it that fails on its own outputs."""

    graph: CapturedGraph
    inputs: list[Any] | None
    gm: torch.fx.GraphModule | None = None
    note: str = ""
    dynamo: DynamoGraph | None = None
    """Set when the failure shows only at the torch level (a wrong decomposition): ``inputs``
    are then that graph's, and its repro compiles it through the whole stack."""
    non_float_only: bool = False
    """The graph's own failing outputs are all non-floating, whatever the check's were: a
    training check's gradients wrong through the indices its forward graph saves."""


@dataclass
class CheckOutcome:
    status: Status
    message: str
    comparison: Comparison | None = None
    reference: str = "fp64"
    graphs: list[CapturedGraph] = field(default_factory=list)
    failing_graphs: list[FailingGraph] = field(default_factory=list)
    compile_seconds: float | None = None
    error: BaseException | None = None
    fallback_random: bool = False
    """The compiled graphs draw random numbers, through eager's generator (Inductor's
    ``fallback_random``), so eager and compiled runs seeded alike draw the same numbers."""
    recurs: bool = False
    """A failing check's compiled model, run again on the same inputs, fails again: the
    deviation recurs in this process, so the test fails whether or not its repro reproduces
    it in a fresh process (:class:`~pytest_torchcompile.checking.confirmation.Unreproduced`)."""

    @property
    def passed(self) -> bool:
        return self.status in (
            Status.PASS,
            Status.NO_FP64_REFERENCE,
            Status.INCONCLUSIVE,
            Status.NOT_JUDGED,
            Status.EAGER_NONDETERMINISTIC,
        )


def _clone_tree(value: Any) -> Any:
    return tree_map(
        lambda leaf: (
            strided_copy(leaf).requires_grad_(leaf.requires_grad)
            if isinstance(leaf, torch.Tensor)
            else copy.deepcopy(leaf)
        ),
        value,
    )


def _to_fp64(value: Any) -> Any:
    return tree_map(widened, value)


def _copy_callable(fn: Callable[..., Any], fp64: bool = False) -> Callable[..., Any]:
    """A deep copy of a module (cast to fp64 on request); plain functions are used as they are."""
    if isinstance(fn, torch.nn.Module):
        if not fp64:
            return copy.deepcopy(fn)
        # Parameters widened as they are copied (as Parameter.__deepcopy__ copies them): an fp32
        # copy cast afterwards would hold the weights in both precisions at once.
        memo: dict[int, Any] = {
            id(p): torch.nn.Parameter(p.data.to(torch.float64), p.requires_grad)
            for p in fn.parameters()
            if type(p) is torch.nn.Parameter and p.is_floating_point()
        }
        return copy.deepcopy(fn, memo).to(torch.float64)
    return fn


def _released(parts: dict[str, Any], model: Callable[..., Any]) -> dict[str, Any]:
    """``parts``, the results of a run of a module's copy, each tensor detached in place from
    the autograd graph that made it: that graph holds the copy's weights (and what a backward
    would read), which nothing judged needs, and would keep them alive beside the next copy.
    In place, since results may sit in any object; a view cannot be, and keeps its graph."""
    if isinstance(model, torch.nn.Module):
        for _, leaf in flatten_outputs(parts):
            if isinstance(leaf, torch.Tensor) and leaf.grad_fn is not None:
                with contextlib.suppress(RuntimeError):
                    leaf.detach_()
    return parts


class EagerRunError(Exception):
    """The model raised when run eagerly: a defect of the test, not of the compiler."""


def _loss(output: Any, loss_fn: Callable[[Any], torch.Tensor] | None) -> torch.Tensor:
    """The user's loss, or the sum of every floating output."""
    if loss_fn is not None:
        return loss_fn(output)
    leaves = [
        leaf
        for _, leaf in flatten_outputs(output)
        if isinstance(leaf, torch.Tensor) and leaf.is_floating_point() and leaf.requires_grad
    ]
    if not leaves:
        raise ValueError("backward=True needs a floating output that requires grad")
    return torch.stack([leaf.float().sum() for leaf in leaves]).sum()


def _trainable(module: torch.nn.Module | None) -> list[tuple[str, torch.Tensor]]:
    if module is None:
        return []
    return [(name, p) for name, p in module.named_parameters() if p.requires_grad]


def _execute(
    call: Callable[..., Any],
    module: torch.nn.Module | None,
    arguments: Arguments,
    options: CheckOptions,
) -> tuple[dict[str, Any], list[Any]]:
    """Run once on clones of the arguments. Returns what is judged, by kind ("out", "grad",
    "param"), and the positional arguments as the call left them (in-place mutations)."""
    args = [_clone_tree(a) for a in arguments[0]]
    kwargs = {k: _clone_tree(v) for k, v in arguments[1].items()}
    if options.steps:
        optimizer = torch.optim.SGD([p for _, p in _trainable(module)], lr=options.lr)
        with torch.enable_grad():
            for _ in range(options.steps):
                optimizer.zero_grad()
                output = call(*args, **kwargs)
                _loss(output, options.loss_fn).backward()
                optimizer.step()
        return {"out": output, "param": {n: p.detach() for n, p in _trainable(module)}}, args
    if not options.backward:
        return {"out": call(*args, **kwargs)}, args
    with torch.enable_grad():
        output = call(*args, **kwargs)
        targets = _trainable(module) + [
            (name, a) for name, a in _named_arguments(args, kwargs) if a.requires_grad
        ]
        grads = torch.autograd.grad(
            _loss(output, options.loss_fn), [t for _, t in targets], allow_unused=True
        )
    # No gradient and a zero gradient are one: compiled code gives zeros where eager gives None
    # (AOT autograd's backward covers every input of the graph, outputs the loss leaves out
    # included: GoogLeNet's auxiliary heads in train mode), as PyTorch's accuracy runs treat them.
    return {
        "out": output,
        "grad": {
            n: torch.zeros_like(t) if g is None else g
            for (n, t), g in zip(targets, grads, strict=True)
        },
    }, args


def _named_arguments(args: Sequence[Any], kwargs: dict[str, Any]) -> list[tuple[str, torch.Tensor]]:
    """The tensor arguments of a call, by the names their gradients are reported under."""
    named = [(f"args[{i}]", a) for i, a in enumerate(args)] + [
        (f"kwargs[{k!r}]", v) for k, v in kwargs.items()
    ]
    return [(name, value) for name, value in named if isinstance(value, torch.Tensor)]


def _differentiable(
    fn: Callable[..., Any], arguments: Arguments, options: CheckOptions
) -> tuple[Arguments, str]:
    """The arguments a gradient check differentiates with respect to, and a note saying which.

    ``backward=True`` on a model with no trainable parameter and no input that requires grad
    means the gradients with respect to its floating inputs (as PyTorch's accuracy runs take
    them): those inputs are made to require grad, on detached aliases, so the caller's tensors
    are left as they are."""
    module = fn if isinstance(fn, torch.nn.Module) else None
    if (
        not options.backward
        or options.steps
        or _trainable(module)
        or any(a.requires_grad for _, a in _named_arguments(*arguments))
    ):
        return arguments, ""
    chosen = [name for name, a in _named_arguments(*arguments) if a.is_floating_point()]
    if not chosen:
        raise ValueError(
            "backward=True needs trainable parameters, inputs that require grad, or floating "
            "inputs to differentiate with respect to; this call has none"
        )

    def promoted(value: Any) -> Any:
        if isinstance(value, torch.Tensor) and value.is_floating_point():
            return value.detach().requires_grad_()
        return value

    return (
        (
            tuple(promoted(a) for a in arguments[0]),
            {k: promoted(v) for k, v in arguments[1].items()},
        ),
        f"backward=True with nothing requiring grad: gradients taken with respect to the floating "
        f"inputs {', '.join(chosen)}",
    )


def unjudgeable_input(
    fn: Callable[..., Any], args: Sequence[Any], kwargs: dict[str, Any]
) -> str | None:
    """Why the check cannot judge a call given these inputs, or None: a tensor not laid out in
    strided memory (sparse, mkldnn, jagged) among the arguments or the model's weights, which the
    copies, comparisons and fp64 widening of a check do not support (``torch.equal`` raises on a
    sparse tensor), or a meta tensor, which holds no values."""
    named: list[tuple[str, Any]] = [(f"args[{index}]", arg) for index, arg in enumerate(args)]
    named += [(f"kwargs[{key!r}]", value) for key, value in kwargs.items()]
    if isinstance(fn, torch.nn.Module):
        named += [*fn.named_parameters(), *fn.named_buffers()]
    found: list[tuple[str, str]] = []
    for name, value in named:
        tree_map(functools.partial(_note_unjudgeable, found, name), value)
    if not found:
        return None
    name, why = found[0]
    return f"{name} holds {why}; the model ran eagerly"


def _note_unjudgeable(found: list[tuple[str, str]], name: str, leaf: Any) -> Any:
    if isinstance(leaf, torch.Tensor) and leaf.layout != torch.strided:
        found.append((name, f"a tensor of layout {leaf.layout}, which the check cannot compare"))
    elif isinstance(leaf, torch.Tensor) and leaf.device.type == "meta":
        found.append((name, "a meta tensor, which holds no values to compare"))
    return leaf


def _mutated_positions(original: Sequence[Any], after: Sequence[Any]) -> list[int]:
    """Positions of the tensor arguments that the eager call changed in place."""
    return [
        index
        for index, (before, now) in enumerate(zip(original, after, strict=True))
        if isinstance(before, torch.Tensor)
        and isinstance(now, torch.Tensor)
        and changed(before, now)
    ]


def _judged(parts: dict[str, Any], call_args: Sequence[Any], mutated: list[int]) -> dict[str, Any]:
    """What a call produced, with the arguments it mutated (those must match too)."""
    return {**parts, **{f"args[{i}] (mutated in place)": call_args[i] for i in mutated}}


def _compare(
    compiled: dict[str, Any],
    eager: dict[str, Any],
    reference: dict[str, Any] | None,
    options: CheckOptions,
    unjudged: dict[str, torch.Tensor] | None = None,
    noise: dict[str, float] | None = None,
    noise_from: dict[str, str] | None = None,
) -> Comparison:
    leaves: list[LeafResult] = []
    for root, value in eager.items():
        part = compare_outputs(
            compiled[root],
            value,
            reference[root] if reference is not None else None,
            options.tolerance,
            not options.ignore_non_float,
            root=root,
            unjudged=unjudged,
            noise=noise,
            noise_from=noise_from,
        )
        if part.structure_error:
            return part
        leaves += part.leaves
    return Comparison(leaves)


def _grown(value: Any, batch: int, size: int) -> Any:
    """``value`` with its leading (batch) dimension grown from ``batch`` to ``size`` by repetition."""
    if isinstance(value, torch.Tensor) and value.dim() > 0 and value.shape[0] == batch:
        repeats = [-(-size // batch)] + [1] * (value.dim() - 1)
        return value.detach().repeat(*repeats)[:size].clone().requires_grad_(value.requires_grad)
    return value


def input_sets(arguments: Arguments, options: CheckOptions) -> list[Arguments]:
    """The arguments to check: the given ones, then ``options.sizes`` or, with ``dynamic=True``,
    the same arguments with the batch dimension grown (a bug may hide at another size)."""
    sets = [arguments]
    if options.sizes is not None:
        return sets + [(tuple(extra), arguments[1]) for extra in options.sizes]
    if options.dynamic:
        tensors = [a for a in arguments[0] if isinstance(a, torch.Tensor) and a.dim() > 0]
        if tensors:
            batch = int(tensors[0].shape[0])
            for size in (2 * batch + 1, 4 * batch + 3):
                sets.append(
                    (
                        tuple(_grown(a, batch, size) for a in arguments[0]),
                        {k: _grown(v, batch, size) for k, v in arguments[1].items()},
                    )
                )
    return sets


def _describe(arguments: Arguments) -> str:
    shapes = [
        list(a.shape)
        for a in (*arguments[0], *arguments[1].values())
        if isinstance(a, torch.Tensor)
    ]
    return f"input sizes {shapes}"


@dataclass
class CompiledEntry:
    """A compiled copy of one model, kept across the checks of one test (hypothesis examples)
    so that later examples reuse the compiled code instead of recompiling."""

    source: Callable[..., Any]
    module: torch.nn.Module | None
    compiled: Callable[..., Any]
    capture: GraphCapture
    probes: ConcurrentProbes

    def matches(self, fn: Callable[..., Any]) -> bool:
        """Still the same model, with the same weights and buffers."""
        if self.module is None or not isinstance(fn, torch.nn.Module):
            return True
        current = fn.state_dict()
        return all(torch.equal(current[k], v) for k, v in self.module.state_dict().items())


@dataclass
class CompiledCache:
    entries: list[CompiledEntry] = field(default_factory=list)

    def lookup(self, fn: Callable[..., Any]) -> CompiledEntry | None:
        """The entry compiled from ``fn`` as it is now; an entry of ``fn`` whose weights have
        changed since is dropped."""
        entry = next((entry for entry in self.entries if entry.source is fn), None)
        if entry is not None and not entry.matches(fn):
            self.entries.remove(entry)
            return None
        return entry

    def keep(self, entry: CompiledEntry) -> None:
        if entry not in self.entries:
            self.entries.append(entry)

    def forget(self, entry: CompiledEntry | None) -> None:
        if entry in self.entries:
            self.entries.remove(entry)

    def clear(self) -> None:
        if self.entries:
            self.entries.clear()
            reset()


def _compile(
    fn: Callable[..., Any], options: CheckOptions, probe_children: ProbeChildren | None
) -> CompiledEntry:
    reset()
    copy_ = _copy_callable(fn)
    probes = ConcurrentProbes(probe_children)
    # The calls of a copy no optimizer steps record the caller's weights while they are alike,
    # instead of a second copy of them.
    originals = dict(_state(fn)) if not options.steps else {}
    capture = GraphCapture(
        lowering_observer=probes.prepare if options.intermediates else None,
        originals=[
            (tensor, originals[name]) for name, tensor in _state(copy_) if name in originals
        ],
    )
    backend = (
        capture.backend(options.mode, random_config=EAGER_RNG_CONFIG)
        if options.backend == "inductor"
        else options.backend
    )
    compiled = torch.compile(
        copy_, backend=backend, dynamic=options.dynamic, fullgraph=options.fullgraph
    )
    module = copy_ if isinstance(copy_, torch.nn.Module) else None
    return CompiledEntry(fn, module, compiled, capture, probes)


def _state(module: Any) -> list[tuple[str, torch.Tensor]]:
    """A module's parameters and buffers, by name (none for a plain function)."""
    if not isinstance(module, torch.nn.Module):
        return []
    return [*module.named_parameters(), *module.named_buffers()]


def check_model(
    fn: Callable[..., Any],
    args: Sequence[Any],
    kwargs: dict[str, Any] | None = None,
    options: CheckOptions | None = None,
    cache: CompiledCache | None = None,
    probe_children: ProbeChildren | None = None,
    on_deviation: Callable[[str, str | None], None] | None = None,
) -> CheckOutcome:
    """Check ``fn(*args, **kwargs)`` compiled by Inductor against eager and an fp64 reference.

    The caller's model and tensors are never mutated: every run works on copies. With ``cache``,
    a model checked again unchanged reuses its compiled code (training checks always recompile,
    since they change the compiled copy's weights). With ``probe_children``, the probes of the
    masked-deviation check compile in a child while the graph compiles here. ``on_deviation``
    is told the Inductor config source and device of a check as soon as its outputs deviate,
    before the rest of its verdict (a second evaluation, the failing graphs) is worked out: the
    child that will confirm the finding starts meanwhile.
    """
    options = options or CheckOptions()
    arguments, gradient_note = _differentiable(fn, (tuple(args), dict(kwargs or {})), options)
    if options.intermediates and options.backend == "inductor" and probe_children is not None:
        probe_children.start(device_of([*args, *(kwargs or {}).values()]))
    unjudged_sizes: list[str] = []
    with full_fp32_precision(), aside():
        outcome = _check(
            fn, arguments, options, cache, probe_children, on_deviation, unjudged_sizes
        )
    outcome.fallback_random = any(graph.has_random_ops for graph in outcome.graphs)
    notes = (
        gradient_note,
        *unjudged_sizes,
        FALLBACK_RANDOM_NOTE if outcome.fallback_random else "",
    )
    outcome.message = "; ".join(part for part in (outcome.message, *notes) if part)
    return outcome


FALLBACK_RANDOM_NOTE = (
    "random ops compiled with Inductor's fallback_random=True: compiled and eager "
    "runs draw the same numbers, the fp64 run replays eager's draws"
)


class _EagerRuns:
    """The eager runs of one check: each on a fresh copy of the model, seeded before it (as the
    compiled and fp64 runs are: random ops draw alike in each), with memory no op wrote filled,
    so that the results depending on it can be found and left out."""

    def __init__(self, fn: Callable[..., Any], options: CheckOptions) -> None:
        self.fn, self.options = fn, options
        self.allocated: list[int] = []
        self.deterministic = False
        """Whether the runs take deterministic kernels (see :func:`_deterministic_kernels`)."""

    def run(
        self,
        arguments: Arguments,
        fill: float = UNLIKE_FILLS[0],
        nan_gradients: tuple[float, list[int]] | None = None,
        nudged: int | None = None,
    ) -> tuple[dict[str, Any], list[Any]]:
        """One eager run; ``nan_gradients``: the fill of gradients at NaN values, and the list of
        what was so filled (:func:`nan_gradients_filled`); ``nudged``: the seed of a run whose
        floating inputs and weights are each moved by a unit in the last place
        (:func:`conditioning.nudged`). Buffers are left as they are: constants such as RoPE's
        inverse frequencies, which no compiled code rounds otherwise, amplify a nudge (by the
        position, there) far beyond any rounding: Qwen2's keys in bf16 moved 13 times eager's
        error, and hid a matmul lowering scaled by 1.01 (H200)."""
        torch.manual_seed(self.options.seed)
        model = _copy_callable(self.fn)
        if nudged is not None:
            generator = torch.Generator().manual_seed(nudged)
            arguments = tree_map(lambda value: nudged_value(value, generator), arguments)
            weights = model.parameters() if isinstance(model, torch.nn.Module) else []
            with torch.no_grad():
                for tensor in weights:
                    tensor.copy_(nudged_value(tensor, generator))
        with (
            filling_unwritten(fill, self.allocated),
            _deterministic_kernels() if self.deterministic else contextlib.nullcontext(),
        ):
            parts, call_args = _execute(
                model if nan_gradients is None else nan_gradients_filled(model, *nan_gradients),
                model if isinstance(model, torch.nn.Module) else None,
                arguments,
                self.options,
            )
        return _released(parts, model), call_args

    def unwritten(
        self, arguments: Arguments, eager: tuple[dict[str, Any], list[Any]], mutated: list[int]
    ) -> dict[str, torch.Tensor] | None:
        """The elements of ``eager``'s results that depend on memory no op wrote: where a run
        with that memory filled otherwise differs."""
        if not self.allocated:
            return None
        parts, call_args = self.run(arguments, UNLIKE_FILLS[1])
        filled, filled_unlike = _judged(*eager, mutated), _judged(parts, call_args, mutated)
        return {
            path: mask
            for root in filled
            for path, mask in differing_leaves(filled[root], filled_unlike[root], root).items()
        }

    def nan_dependent_gradients(
        self, arguments: Arguments, eager: tuple[dict[str, Any], list[Any]]
    ) -> dict[str, torch.Tensor] | None:
        """The elements of ``eager``'s gradients that depend on a value its forward computed as
        NaN: where two runs that fill the gradients at NaN values unlike differ (eager's kernels
        give those no one value). None without a gradient, or where no NaN requires grad; nothing
        is run where no NaN is among the arguments and ``eager``'s results
        (:func:`nan_dependent_gradients` says why)."""
        if not self.options.backward or self.options.steps:
            return None
        values = [*flatten_outputs((arguments, eager[0]), "values")]
        if not holds_nan([value for _, value in values]):
            return None
        runs = []
        for fill in UNLIKE_FILLS:
            filled: list[int] = []
            runs.append(self.run(arguments, nan_gradients=(fill, filled))[0])
            if not filled:
                return None
        first, second = runs
        return differing_leaves(first["grad"], second["grad"], "grad")


@dataclass
class _Baseline:
    """Eager's first run, which every later step compares with."""

    parts: dict[str, Any]
    call_args: list[Any]
    mutated: list[int]
    draws_random: bool
    spread: _Spread | None = None
    """Where eager disagrees with itself, deterministic kernels too: its second run."""


@dataclass
class _Spread:
    """Eager runs on the same inputs that disagree with the first beyond the tolerance, the
    generators seeded alike: how far eager's own results move from run to run, each as
    legitimate an evaluation as the first, so compiled code (which calls the same kernels) is
    measured against the largest of their errors too."""

    runs: list[tuple[dict[str, Any], list[Any]]]
    where: str
    """The first result where eager's first two runs differ beyond the tolerance."""
    settled: bool
    """Whether deterministic kernels agree with themselves (they are then eager's baseline)."""
    cause: str


@dataclass
class _CompiledRuns:
    entry: CompiledEntry
    results: list[
        tuple[Arguments, tuple[dict[str, Any], list[Any]], tuple[dict[str, Any], list[Any]]]
    ]
    """Per input set: its arguments, eager's run and the compiled run."""
    seconds: float


def _check(
    fn: Callable[..., Any],
    given: Arguments,
    options: CheckOptions,
    cache: CompiledCache | None,
    probe_children: ProbeChildren | None,
    on_deviation: Callable[[str, str | None], None] | None,
    unjudged_sizes: list[str],
) -> CheckOutcome:
    """The steps of a check: eager twice (a model that disagrees with itself cannot be judged),
    eager on the other input sets, the fp64 references, the compiled runs, the comparison of each
    input set, then what passing outputs may hide (masked deviations) and what a pass is worth.
    ``unjudged_sizes`` is given a note for each size ``dynamic=True`` grew to that eager raises at
    (:func:`_eager_sets`)."""
    eager = _EagerRuns(fn, options)
    baseline = _eager_baseline(eager, given, options)
    if isinstance(baseline, CheckOutcome):
        return baseline
    sets, eager_runs = _eager_sets(eager, input_sets(given, options), baseline, unjudged_sizes)
    # The fp64 runs come before the compile: the fp64 copy of the model (twice its fp32 weights)
    # is gone before the compiled copy is made, never beside it.
    references = [
        _reference(fn, arguments, options, baseline.mutated, baseline.draws_random)
        for arguments in sets
    ]
    compiled = _compiled_runs(fn, sets, eager_runs, options, cache, probe_children)
    if isinstance(compiled, CheckOutcome):
        return compiled
    graphs = compiled.entry.capture.graphs
    comparison = Comparison([])
    for index, ((arguments, eager_run, compiled_run), (reference, label)) in enumerate(
        zip(compiled.results, references, strict=True)
    ):
        comparison, rejudge = _compare_set(
            fn,
            arguments,
            eager_run,
            compiled_run,
            reference,
            eager,
            baseline,
            options,
            graphs,
            on_deviation,
            baseline.spread if index == 0 else None,
        )
        if not comparison.passed:
            where = f" at {_describe(arguments)}" if len(sets) > 1 else ""
            message = comparison.structure_error or (
                f"{len(comparison.failing)} of {len(comparison.leaves)} outputs deviate beyond the "
                f"{'fp64 rule' if reference is not None else 'cosine check'}{where}"
            )
            if baseline.spread is not None:
                message += f"; {_spread_note(baseline.spread)}, which was counted"
            return CheckOutcome(
                Status.FAIL_ACCURACY,
                message,
                comparison,
                label,
                graphs,
                _failing_graphs(graphs, compiled.entry.capture.dynamo_graphs, options),
                compiled.seconds,
                recurs=_recurs(compiled.entry, arguments, options, rejudge),
            )
    outcome = _passing_outcome(compiled, baseline, comparison, references[-1][1], options)
    spread = baseline.spread
    if spread is not None and outcome.status is Status.PASS:
        # Where deterministic kernels agree, eager's baseline is theirs: a pass; else the
        # verdict rests on eager's spread alone, and says so.
        outcome.status = Status.PASS if spread.settled else Status.EAGER_NONDETERMINISTIC
        outcome.message = f"{_spread_note(spread)}: compiled code is within the spread of its runs"
    return outcome


def _spread_note(spread: _Spread) -> str:
    return (
        f"eager disagrees with itself across two runs on the same inputs at {spread.where} "
        f"({spread.cause})"
    )


def _eager_sets(
    eager: _EagerRuns, sets: list[Arguments], baseline: _Baseline, unjudged_sizes: list[str]
) -> tuple[list[Arguments], list[tuple[dict[str, Any], list[Any]]]]:
    """The input sets to judge and eager's run on each (the given set's is the baseline's). A size
    ``dynamic=True`` grew the batch to is the check's choice, not the test's: where eager raises
    there (a model that takes one batch size), it is left out, with a note in ``unjudged_sizes``;
    where eager raises at a size the test gave (``sizes=``), the model raised eagerly."""
    kept, runs = [sets[0]], [(baseline.parts, baseline.call_args)]
    for arguments in sets[1:]:
        try:
            runs.append(eager.run(arguments))
        except Exception as error:
            signature = error_signature(error, max_chars=300)
            if eager.options.sizes is not None:
                raise EagerRunError(
                    f"the model raised when run eagerly at {_describe(arguments)}: {signature}"
                ) from error
            unjudged_sizes.append(
                f"not judged at {_describe(arguments)}, a batch size dynamic=True grows to: "
                f"eager raises there ({signature})"
            )
            continue
        kept.append(arguments)
    return kept, runs


def _eager_baseline(
    eager: _EagerRuns, given: Arguments, options: CheckOptions
) -> _Baseline | CheckOutcome:
    """Eager's first run, and a second on the same inputs, compared; where they disagree, two
    more with deterministic kernels, the first of which is then the baseline, every run kept as
    a measure of eager's own spread (:class:`_Spread`). The outcome instead where eager runs out
    of memory. No disagreement fails the check: compiled code is judged against the spread."""
    torch.manual_seed(options.seed)
    seeded = rng_states()
    settled = True
    try:
        parts, call_args = eager.run(given)
        draws_random = any(
            not torch.equal(a, b) for a, b in zip(seeded, rng_states(), strict=False)
        )
        runs = [eager.run(given)]
        unstable = _disagreement(parts, runs[0][0], options)
        if unstable is not None:
            # A GPU convolution's weight gradient accumulates in an order that changes from run
            # to run (timm's inception_v3 in training, H200; cuDNN's backward of torchvision's
            # deeplabv3 in training, which draws random numbers too, seeded alike in each run):
            # deterministic kernels are as legitimate an eager, and two of their runs agree.
            runs.insert(0, (parts, call_args))
            eager.deterministic = True
            parts, call_args = eager.run(given)
            runs.append(eager.run(given))
            settled = _disagreement(parts, runs[-1][0], options) is None
    except Exception as error:
        if out_of_memory(error):
            return CheckOutcome(
                Status.OUT_OF_MEMORY,
                f"the eager run ran out of memory: {error_signature(error, max_chars=300)}",
                error=error,
            )
        raise EagerRunError(
            f"the model raised when run eagerly: {error_signature(error, max_chars=300)}"
        ) from error
    spread = None
    if unstable is not None:
        cause = (
            "deterministic kernels agree: a kernel's order of accumulation"
            if settled
            else "deterministic kernels too, "
            + (
                "though it draws its random numbers seeded alike in each run"
                if draws_random
                else "and it draws no random numbers from torch's generators"
            )
            + ": a kernel without a deterministic form, or state a call changes (a global, an "
            "attribute, a generator of its own)"
        )
        spread = _Spread(runs, unstable, settled, cause)
    return _Baseline(
        parts, call_args, _mutated_positions(given[0], call_args), draws_random, spread
    )


def _disagreement(
    parts: dict[str, Any], again: dict[str, Any], options: CheckOptions
) -> str | None:
    """Where two eager runs' results differ beyond the tolerance, or None."""
    return next(
        (
            where
            for root in parts
            if (where := first_disagreement(parts[root], again[root], options.tolerance, root))
        ),
        None,
    )


@contextlib.contextmanager
def _deterministic_kernels() -> Iterator[None]:
    """Deterministic algorithms for the block, cuDNN's among them (an op with none runs as it
    would, its warning kept from the test), the flags put back after it."""
    cudnn = torch.backends.cudnn.deterministic
    algorithms, warn_only = (
        torch.are_deterministic_algorithms_enabled(),
        torch.is_deterministic_algorithms_warn_only_enabled(),
    )
    try:
        torch.backends.cudnn.deterministic = True
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.use_deterministic_algorithms(True, warn_only=True)
            yield
    finally:
        torch.backends.cudnn.deterministic = cudnn
        torch.use_deterministic_algorithms(algorithms, warn_only=warn_only)


def _compiled_runs(
    fn: Callable[..., Any],
    sets: list[Arguments],
    eager_runs: list[tuple[dict[str, Any], list[Any]]],
    options: CheckOptions,
    cache: CompiledCache | None,
    probe_children: ProbeChildren | None,
) -> _CompiledRuns | CheckOutcome:
    """The compiled model's run on each input set beside eager's, compiled anew or taken from
    ``cache``; the outcome instead where compiling or running it raised. A cached copy that
    Dynamo no longer compiles (its recompile limit) is dropped and compiled afresh, once."""
    keeping = cache if not options.training else None
    entry = keeping.lookup(fn) if keeping is not None else None
    started = time.perf_counter()
    try:
        with inductor_config(options.inductor_config), no_compile_caches(), strict_dynamo():
            results = _run_sets(entry, sets, eager_runs, options) if entry is not None else None
            if entry is not None and not any(graph.calls for graph in entry.capture.graphs):
                # Past Dynamo's recompile limit the cached copy runs eagerly: nothing was judged.
                assert keeping is not None
                keeping.forget(entry)
                entry = results = None
            if entry is None:
                entry = _compile(fn, options, probe_children)
                results = _run_sets(entry, sets, eager_runs, options)
    except Exception as error:
        if keeping is not None:
            keeping.forget(entry)
        graphs = entry.capture.graphs if entry is not None else []
        return _compiler_error_outcome(error, graphs, time.perf_counter() - started)
    assert entry is not None and results is not None
    if keeping is not None:
        keeping.keep(entry)
    else:
        reset()
    return _CompiledRuns(entry, results, time.perf_counter() - started)


def _run_sets(
    entry: CompiledEntry,
    sets: list[Arguments],
    eager_runs: list[tuple[dict[str, Any], list[Any]]],
    options: CheckOptions,
) -> list[tuple[Arguments, tuple[dict[str, Any], list[Any]], tuple[dict[str, Any], list[Any]]]]:
    entry.capture.forget_calls()
    results = []
    for arguments, eager_run in zip(sets, eager_runs, strict=True):
        torch.manual_seed(options.seed)
        results.append(
            (arguments, eager_run, _execute(entry.compiled, entry.module, arguments, options))
        )
    return results


def _run_again(
    entry: CompiledEntry, arguments: Arguments, options: CheckOptions
) -> tuple[dict[str, Any], list[Any]]:
    """The compiled model run once more on an input set, from the weights and buffers its first
    run started from (the caller's, which no check changes) and seeded alike: whether a deviation
    recurs in this process."""
    if entry.module is not None:
        weights = dict(_state(entry.source))
        with torch.no_grad():
            for name, tensor in _state(entry.module):
                if name in weights:
                    tensor.copy_(weights[name])
    torch.manual_seed(options.seed)
    with inductor_config(options.inductor_config), no_compile_caches(), strict_dynamo():
        return _execute(entry.compiled, entry.module, arguments, options)


def _recurs(
    entry: CompiledEntry,
    arguments: Arguments,
    options: CheckOptions,
    rejudge: Callable[[tuple[dict[str, Any], list[Any]]], Comparison],
) -> bool:
    """Whether the compiled model, run again on ``arguments`` (:func:`_run_again`), fails the
    check's judgement again. A second run that raises says nothing of the first's deviation."""
    try:
        return not rejudge(_run_again(entry, arguments, options)).passed
    except Exception:
        return False


def _compare_set(
    fn: Callable[..., Any],
    arguments: Arguments,
    eager_run: tuple[dict[str, Any], list[Any]],
    compiled_run: tuple[dict[str, Any], list[Any]],
    reference: dict[str, Any] | None,
    eager: _EagerRuns,
    baseline: _Baseline,
    options: CheckOptions,
    graphs: list[CapturedGraph],
    on_deviation: Callable[[str, str | None], None] | None,
    spread: _Spread | None = None,
) -> tuple[Comparison, Callable[[tuple[dict[str, Any], list[Any]]], Comparison]]:
    """One input set's outputs judged; where they fail by the fp64 rule, judged again against the
    second legitimate evaluations' errors (run only then), which may overturn it: eager on the
    batch reversed and in channels-last layout, then, where outputs still fail, Inductor's
    decomposed graphs run eagerly (:func:`_decomposed_floors`); and where eager disagrees with
    itself (``spread``), its second run. With the comparison, the same judgement of another
    compiled run (its masks and floors as found here)."""
    mutated = baseline.mutated
    floors: dict[str, float] = {}
    deciding: dict[str, str] = {}
    compared = (
        _judged(*compiled_run, mutated),
        _judged(*eager_run, mutated),
        reference,
        options,
        eager.unwritten(arguments, eager_run, mutated),
    )
    comparison = _compare(*compared)
    if not comparison.passed and any(leaf.path.startswith("grad") for leaf in comparison.failing):
        # Found only where a gradient fails: it costs two more eager forward and backward runs.
        through_nan = eager.nan_dependent_gradients(arguments, eager_run)
        if through_nan:
            compared = (*compared[:4], _either(compared[4], through_nan))
            comparison = _compare(*compared)
    if not comparison.passed and on_deviation is not None and graphs:
        on_deviation(
            graphs[0].config_source, device_of(list(arguments[0]) + list(arguments[1].values()))
        )
    if reference is not None and comparison.failing_by_fp64_rule:
        floors = _noise_floors(
            fn, arguments, options, mutated, reference, eager.run, baseline.draws_random
        )
        for run in spread.runs if spread is not None else []:
            found = noise_floors(_judged(*run, mutated), reference, reference, None)
            raise_floors(floors, deciding, found, EAGER_SPREAD_FLOOR)
        comparison = _compare(*compared, floors, deciding or None)
        if (
            comparison.failing_by_fp64_rule
            and options.backend == "inductor"
            and not baseline.draws_random
            and _capped_floors_could_pass(compared, reference, floors, comparison)
        ):
            decomposed = _decomposed_floors(fn, arguments, options, mutated, reference, compared[1])
            if raise_floors(floors, deciding, decomposed, DECOMPOSED_FLOOR):
                comparison = _compare(*compared, floors, deciding)
    discontinuous: dict[str, float] = {}
    if not comparison.passed and reference is not None:
        # The output's conditioning: how far a rounding-sized change of the inputs and weights
        # moves it (a jump across a tie: max pooling, a ReLU's edge, a floor).
        comparison, discontinuous = conditioned(
            comparison,
            lambda floors, deciding: _compare(*compared, floors, deciding),
            lambda seed: _judged(*eager.run(arguments, nudged=seed), mutated),
            reference,
            floors,
            deciding,
        )

    def rejudge(run: tuple[dict[str, Any], list[Any]]) -> Comparison:
        return judged_discontinuous(
            _compare(_judged(*run, mutated), *compared[1:], floors or None, deciding or None),
            discontinuous,
        )

    return comparison, rejudge


def _either(
    first: dict[str, torch.Tensor] | None, second: dict[str, torch.Tensor]
) -> dict[str, torch.Tensor]:
    """By leaf path, the elements that one set of masks or the other marks."""
    merged = dict(first or {})
    for path, mask in second.items():
        merged[path] = merged[path] | mask if path in merged else mask
    return merged


def _capped_floors_could_pass(
    compared: tuple[
        dict[str, Any],
        dict[str, Any],
        dict[str, Any] | None,
        CheckOptions,
        dict[str, torch.Tensor] | None,
    ],
    reference: dict[str, Any],
    floors: dict[str, float],
    comparison: Comparison,
) -> bool:
    """Whether floors of at most ``DECOMPOSED_CAP`` times eager's error (what the decomposed
    graphs can give) could make an output that fails by the fp64 rule pass: where even the
    largest cannot, the decomposed graphs are not run (their compiles and runs cost a failing
    check seconds, and their verdict could only be the same)."""
    failing = comparison.failing_by_fp64_rule
    largest = capped(dict.fromkeys(failing, math.inf), compared[1], reference)
    ceiling = {
        **floors,
        **{path: max(floor, floors.get(path, 0.0)) for path, floor in largest.items()},
    }
    return any(leaf.passed for leaf in _compare(*compared, ceiling).leaves if leaf.path in failing)


EAGER_SPREAD_FLOOR = "eager run again on the same inputs, which disagrees with its first run"


DECOMPOSED_FLOOR = (
    f"Inductor's decomposed graphs run by eager kernels, which give the fp64 reference in fp64; "
    f"at most {DECOMPOSED_CAP:g}x eager's error counted"
)


def _passing_outcome(
    compiled: _CompiledRuns,
    baseline: _Baseline,
    comparison: Comparison,
    reference_label: str,
    options: CheckOptions,
) -> CheckOutcome:
    """Where every output passed: a deviation a later op masks fails it yet; results that hold
    no tensor, or outputs no result in their dtype can judge, are told apart from a pass."""
    graphs, seconds = compiled.entry.capture.graphs, compiled.seconds
    if options.intermediates and options.backend == "inductor":
        with inductor_config(options.inductor_config):
            masked = _masked_divergence(graphs, compiled.entry.probes, options)
        if masked is not None:
            graph, divergence = masked
            return CheckOutcome(
                Status.FAIL_ACCURACY,
                f"{graph.label}: {divergence.message}",
                dataclasses.replace(comparison, leaves=[*comparison.leaves, divergence.shown_leaf]),
                reference_label,
                graphs,
                [FailingGraph(graph, divergence.inputs, divergence.gm, divergence.note)],
                seconds,
            )
    judged = _judged(baseline.parts, baseline.call_args, baseline.mutated)
    if not any(
        isinstance(leaf, torch.Tensor | float)
        for root in judged
        for _, leaf in flatten_outputs(judged[root], root)
    ):
        kinds = sorted(
            {
                type(leaf).__name__
                for root in judged
                for _, leaf in flatten_outputs(judged[root], root)
            }
        )
        return CheckOutcome(
            Status.NOT_JUDGED,
            f"nothing judged: the results hold no tensor (only {', '.join(kinds)})",
            comparison,
            reference_label,
            graphs,
            compile_seconds=seconds,
        )
    if inconclusive := comparison.inconclusive:
        return CheckOutcome(
            Status.INCONCLUSIVE,
            f"{len(inconclusive)} of {len(comparison.leaves)} outputs "
            f"inconclusive, {inconclusive[0].path}: {inconclusive[0].detail}",
            comparison,
            reference_label,
            graphs,
            compile_seconds=seconds,
        )
    status = Status.PASS if reference_label == "fp64" else Status.NO_FP64_REFERENCE
    return CheckOutcome(
        status,
        "",
        comparison,
        reference_label,
        graphs,
        compile_seconds=seconds,
    )


def _reference(
    fn: Callable[..., Any],
    arguments: Arguments,
    options: CheckOptions,
    mutated: list[int],
    model_draws_random: bool,
) -> tuple[dict[str, Any] | None, str]:
    """The fp64 run's results, or None (with the label of the weaker check) when it cannot run.
    A model that draws random numbers is run once more eagerly to record its draws, which the
    fp64 run replays: in fp64, some ops draw other numbers (``torch.rand``, CUDA's generators)."""
    widened: Arguments = _to_fp64(arguments)
    draws: list[tuple[Any, Any]] = []
    if model_draws_random:
        torch.manual_seed(options.seed)
        model = _copy_callable(fn)
        with recording_random_draws(draws):
            _execute(
                model, model if isinstance(model, torch.nn.Module) else None, arguments, options
            )
    torch.manual_seed(options.seed)
    try:
        with (
            float64_everywhere(),
            replaying_random_draws(draws) if model_draws_random else contextlib.nullcontext(),
        ):
            model = _copy_callable(fn, fp64=True)
            parts, call_args = _execute(
                model, model if isinstance(model, torch.nn.Module) else None, widened, options
            )
            parts = _released(parts, model)
    except RandomDrawMismatch as error:
        return (
            None,
            f"same-precision cosine check: the fp64 run draws random numbers unlike eager ({error})",
        )
    except Exception as error:
        # Eager's and the compiled results fit where the fp64 ones do not: they are still judged.
        cause = (
            f"the fp64 reference does not fit in memory: the model's weights and inputs alone take "
            f"{fp64_bytes(fn, arguments) / 2**30:.2f} GiB in fp64"
            if out_of_memory(error)
            else "the model cannot run in fp64"
        )
        return (
            None,
            f"same-precision cosine check: {cause} ({error_signature(error, max_chars=300)})",
        )
    return _judged(parts, call_args, mutated), "fp64"


def _noise_floors(
    fn: Callable[..., Any],
    arguments: Arguments,
    options: CheckOptions,
    mutated: list[int],
    reference: dict[str, Any],
    eager_run: Callable[[Arguments], tuple[dict[str, Any], list[Any]]],
    model_draws_random: bool,
) -> dict[str, float]:
    """By output path, the largest error of the second legitimate evaluations (:mod:`reordering`:
    eager on the batch reversed, eager on channels-last inputs); run only for a check that fails
    by the fp64 rule, which they may overturn. A model that draws random numbers gets no reversed
    batch (its draws would land on other samples); its channels-last run draws as eager did, and
    its fp64 run replays those draws."""
    evaluations: list[tuple[Arguments, int | None]] = []
    if not model_draws_random and (reordered := reversed_batch(arguments)) is not None:
        evaluations.append(reordered)
    if (laid_out := channels_last(arguments)) is not None:
        evaluations.append((laid_out, None))
    floors: dict[str, float] = {}
    for evaluated_arguments, batch in evaluations:
        try:
            parts, call_args = eager_run(evaluated_arguments)
            fp64, _ = _reference(fn, evaluated_arguments, options, mutated, model_draws_random)
        except Exception:  # the model may not take these arguments: no second sample, nothing lost
            continue
        if fp64 is None:
            continue
        for path, floor in noise_floors(
            _judged(parts, call_args, mutated), fp64, reference, batch
        ).items():
            floors[path] = max(floor, floors.get(path, 0.0))
    return floors


def _decomposed_floors(
    fn: Callable[..., Any],
    arguments: Arguments,
    options: CheckOptions,
    mutated: list[int],
    reference: dict[str, Any],
    eager: dict[str, Any],
) -> dict[str, float]:
    """By output path, the error from fp64 of the model run through Inductor's decompositions
    and partitioner by eager kernels (:mod:`reordering`), where the same graphs run in fp64 give
    the fp64 reference (a wrong decomposition does not), each at most ``DECOMPOSED_CAP`` times
    eager's own error (``eager``: eager's judged results). Run only for outputs that fail
    after the reordered evaluations; a model that draws random numbers gets none (the
    decomposed graphs draw otherwise). The compiles leave Dynamo as a check leaves it."""
    if decomposed_missing() is not None:
        return {}
    widened_arguments: Arguments = _to_fp64(arguments)
    runs: list[dict[str, Any]] = []
    try:
        with inductor_config(options.inductor_config), no_compile_caches(), strict_dynamo():
            for fp64, evaluated in ((False, arguments), (True, widened_arguments)):
                reset()
                torch.manual_seed(options.seed)
                model = _copy_callable(fn, fp64=fp64)
                with float64_everywhere() if fp64 else contextlib.nullcontext():
                    parts, call_args = _execute(
                        decomposed(model, options.dynamic, fp64=fp64),
                        model if isinstance(model, torch.nn.Module) else None,
                        evaluated,
                        options,
                    )
                runs.append(_judged(_released(parts, model), call_args, mutated))
                del model, parts, call_args
    except Exception:  # the model may not compile so: no decomposed sample, nothing lost
        return {}
    finally:
        reset()
    return capped(noise_floors(runs[0], runs[1], reference, None), eager, reference)


def model_tensors(
    fn: Callable[..., Any], args: Sequence[Any], kwargs: dict[str, Any]
) -> list[torch.Tensor]:
    """A model's weights and buffers and its arguments' tensors (in containers too)."""
    tensors: list[torch.Tensor] = (
        list(fn.parameters()) + list(fn.buffers()) if isinstance(fn, torch.nn.Module) else []
    )
    tree_map(
        lambda leaf: tensors.append(leaf) if isinstance(leaf, torch.Tensor) else None,
        (list(args), kwargs),
    )
    return tensors


def fp64_bytes(fn: Callable[..., Any], arguments: Arguments) -> int:
    """What the model's weights and tensor inputs take once widened to fp64."""
    tensors = model_tensors(fn, arguments[0], arguments[1])
    return sum(
        t.numel() * (16 if t.is_complex() else 8)
        if t.is_floating_point() or t.is_complex()
        else t.nbytes
        for t in tensors
    )


def _compiler_error_outcome(
    error: BaseException, graphs: list[CapturedGraph], elapsed: float
) -> CheckOutcome:
    environment = environment_failure(error) or next(
        (
            found
            for graph in graphs
            if (found := environment_failure(graph.compile_error or graph.runtime_error))
        ),
        None,
    )
    if environment is not None:
        # The compiler is not at fault: no repro, no minification.
        return CheckOutcome(
            Status.NOT_JUDGED,
            f"{ENVIRONMENT_NOT_JUDGED}: {error_signature(environment, max_chars=300)}; "
            "the model ran eagerly",
            graphs=graphs,
            compile_seconds=elapsed,
            error=error,
        )
    if out_of_memory(error) or any(
        out_of_memory(g.compile_error or g.runtime_error) for g in graphs
    ):
        return CheckOutcome(
            Status.OUT_OF_MEMORY,
            f"compiling or running the compiled model ran out of memory: "
            f"{error_signature(error, max_chars=300)}",
            graphs=graphs,
            compile_seconds=elapsed,
            error=error,
        )
    compile_failed = [g for g in graphs if g.compile_error is not None]
    if compile_failed:
        graph = compile_failed[0]
        return CheckOutcome(
            Status.FAIL_COMPILE,
            f"Inductor failed to compile {graph.label}: "
            f"{error_signature(graph.compile_error or error, max_chars=300)}",
            graphs=graphs,
            failing_graphs=[FailingGraph(graph, None)],
            compile_seconds=elapsed,
            error=error,
        )
    run_failed = [g for g in graphs if g.runtime_error is not None]
    if run_failed:
        graph = run_failed[0]
        return CheckOutcome(
            Status.FAIL_RUNTIME,
            f"compiled code raised in {graph.label}: "
            f"{error_signature(graph.runtime_error or error, max_chars=300)}",
            graphs=graphs,
            failing_graphs=[FailingGraph(graph, graph.calls[-1] if graph.calls else None)],
            compile_seconds=elapsed,
            error=error,
        )
    where = "".join(traceback.format_exception_only(error)).strip().splitlines()[0]
    return CheckOutcome(
        Status.FAIL_COMPILE,
        f"torch.compile raised before Inductor lowered a graph: {where}",
        graphs=graphs,
        compile_seconds=elapsed,
        error=error,
    )


# --- one graph at a time -------------------------------------------------------------------


def _judged_call(graph: CapturedGraph, inputs: list[Any], options: CheckOptions) -> Comparison:
    """One recorded call of a compiled graph judged (its outputs and the inputs it writes into)."""
    mutated = mutated_inputs(graph.gm, inputs)
    eager, fp64 = reference_outputs(graph.gm, inputs, mutated=mutated)
    args = clone_values(inputs)
    with torch.no_grad():
        outputs = (
            [*graph.compiled(list(args)), *(args[index] for index in mutated)]
            if graph.compiled is not None
            else []
        )
    leaves = compare_graph_outputs(
        outputs,
        eager,
        fp64,
        options.tolerance,
        not options.ignore_non_float,
        unjudged=unwritten_elements(graph.gm, inputs, mutated=mutated),
        mutated=mutated,
        not_values=generator_state_outputs(graph.gm),
    )
    return Comparison(leaves)


def _failing_graphs(
    graphs: list[CapturedGraph], dynamo_graphs: list[DynamoGraph], options: CheckOptions
) -> list[FailingGraph]:
    """The recorded graph calls that fail on their own, worst first. When no post-AOT graph does,
    the torch-level graphs whose calls fail compiled through the whole stack (the bug was in the
    graph Inductor received: a decomposition); else every graph's last call (the deviation then
    builds up across graph breaks)."""
    scored: list[tuple[float, FailingGraph]] = []
    for graph in graphs:
        if graph.compiled is None or graph.has_random_ops:
            continue
        for inputs in graph.calls:
            judged = _judged_call(graph, inputs, options)
            if not judged.passed:
                ratio = max(
                    (leaf.ratio for leaf in judged.failing if leaf.ratio is not None),
                    default=math.inf,
                )
                scored.append(
                    (
                        ratio,
                        FailingGraph(graph, inputs, non_float_only=judged.fails_only_in_non_float),
                    )
                )
                break
    if not scored:
        return _failing_dynamo_graphs(dynamo_graphs, options) or [
            FailingGraph(
                g,
                g.calls[-1],
                note="no graph deviates alone: the error builds up across graph breaks",
            )
            for g in graphs
            if g.calls
        ]
    return [failing for _, failing in sorted(scored, key=lambda item: -item[0])]


TORCH_LEVEL_NOTE = (
    "its post-AOT graph passes on its own: the deviation is already in the graph Inductor "
    "receives (a decomposition applied while AOT autograd traces), so this repro holds "
    "the torch-level graph and compiles it through the whole stack"
)


def _failing_dynamo_graphs(
    dynamo_graphs: list[DynamoGraph], options: CheckOptions
) -> list[FailingGraph]:
    """Torch-level graphs that fail on their own, judged as their repro will judge them (a
    compile through the whole stack, forward and backward in a training call), worst first."""
    scored: list[tuple[float, FailingGraph]] = []
    for graph in dynamo_graphs:
        if not graph.calls or not graph.judgeable():
            continue
        inputs = graph.calls[0]
        with (
            inductor_config(config_patches(graph.config_source)),
            torch.set_grad_enabled(options.training),
        ):
            verdict = judge_graph(
                graph.gm, inputs, options.tolerance, not options.ignore_non_float, level=DYNAMO
            )
        if verdict.failure == FailureKind.ACCURACY:
            scored.append(
                (
                    verdict.worst_ratio or math.inf,
                    FailingGraph(graph.lowered[0], inputs, note=TORCH_LEVEL_NOTE, dynamo=graph),
                )
            )
    return [failing for _, failing in sorted(scored, key=lambda item: -item[0])]


def _masked_divergence(
    graphs: list[CapturedGraph],
    probes: ConcurrentProbes,
    options: CheckOptions,
) -> tuple[CapturedGraph, MaskedDivergence] | None:
    for graph in graphs:
        if graph.compiled is None or not graph.calls or graph.has_random_ops:
            continue
        divergence = find_masked_divergence(
            graph.gm, graph.calls[0], options.tolerance, probes.prepared.get(graph.index)
        )
        if divergence is not None:
            return graph, divergence
    return None
