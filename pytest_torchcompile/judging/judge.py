"""Judge one graph on real inputs: compile it, run it, compare with eager and fp64.

A graph is post-AOT (what Inductor lowers: compiled by Inductor alone) or torch-level (what Dynamo
captures, before AOT autograd and Inductor's decompositions: compiled through the whole stack, so
that a wrong decomposition shows against eager of the undecomposed graph).

Shared by the plugin's per-graph checks, the minifier's candidates and every generated repro file,
whose source embeds this module (with the oracle's rule and the compile helper), so that a repro
judges exactly as the plugin did. Hence: torch and the standard library only.
"""

from __future__ import annotations

import contextlib
import copy
import importlib
import inspect
import re
import sys
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from pytest_torchcompile.common.kinds import FailureKind
from pytest_torchcompile.common.leaves import LeafResult
from pytest_torchcompile.judging.rule import error_signature, normalized_error
from pytest_torchcompile.judging.tensor_comparison import (
    compare_tensor,
    unwritten_mask,
    written_only,
)
from pytest_torchcompile.torch_internals.fp64 import float64_everywhere
from pytest_torchcompile.torch_internals.graph_compile import compile_dynamo_graph, compile_graph
from pytest_torchcompile.torch_internals.unwritten import filling_unwritten

FIXED_EXIT, REPRODUCED_EXIT, FAILS_DIFFERENTLY_EXIT, BROKEN_EXIT = 0, 1, 2, 3
"""A repro's exit statuses: the failure is gone, it reproduces, the graph fails another way, the
repro itself cannot run (an op it calls is missing, its graph cannot be built, or its graph fails
eagerly on its own inputs): it then says nothing about the compiler."""


class ReproBroken(Exception):
    """A repro that cannot run here: its file does not load, an op it calls is missing, its graph
    cannot be built."""


def register_ops(required: Sequence[tuple[str, str | None, str | None]]) -> str | None:
    """Import the modules that register the ops a graph calls (``(namespace::name, module,
    sys.path entry)``); None once every op exists, else what is missing and why."""
    for qualname, module, search_path in required:
        namespace, name = qualname.split("::", 1)
        if module is not None and not _has_op(namespace, name):
            try:
                try:
                    importlib.import_module(module)
                except ModuleNotFoundError:
                    if not search_path or search_path in sys.path:
                        raise
                    sys.path.append(search_path)
                    importlib.import_module(module)
            except Exception as error:
                return (f"op torch.ops.{namespace}.{name} is registered by module {module}, which does not "
                        f"import here: {type(error).__name__}: {error}")
        if not _has_op(namespace, name):
            where = (f"importing {module} does not register it" if module is not None
                     else "the module or library that registers it is unknown: load it before running")
            return f"op torch.ops.{namespace}.{name} is missing: {where}"
    return None


def _has_op(namespace: str, name: str) -> bool:
    try:
        return hasattr(getattr(torch.ops, namespace), name)
    except Exception:
        return False


POST_AOT = "post_aot"
DYNAMO = "dynamo"
"""Graph levels: what Inductor lowers, and what Dynamo captures before AOT autograd."""


@dataclass
class GraphVerdict:
    """What one graph did: ``failure`` is None when compiled matches, else one of the kinds above."""

    failure: FailureKind | None
    leaves: list[LeafResult] = field(default_factory=list)
    error: str | None = None
    reference: str = "fp64"

    @property
    def worst_ratio(self) -> float | None:
        ratios = [leaf.ratio for leaf in self.leaves if leaf.ratio is not None]
        return max(ratios) if ratios else None


@contextlib.contextmanager
def full_fp32_precision() -> Iterator[None]:
    """Turn TF32 off while checking, as PyTorch's own accuracy runs do: cuDNN uses it by default,
    so eager and compiled code can take different precision paths for one op (a depthwise
    convolution eagerly exact, compiled through cuDNN in TF32) and differ by far more than
    either's rounding. Matmuls run in full fp32 too (``set_float32_matmul_precision("medium")``
    makes CPU matmuls bf16).

    Works where global flags are frozen (``torch.backends.disable_global_flags()``, which
    ``torch.testing._internal.common_utils`` calls on import) and with either TF32 API, and
    restores every flag as it was. The legacy API's deprecation warning (torch 2.9 to 2.11 give
    it from the getters and setters this calls) is the plugin's to hear, not the user's: under
    ``-W error`` it would fail the user's test."""
    with _legacy_tf32_api_quiet(), _matmul_in_fp32(), _cudnn_without_tf32():
        yield


LEGACY_TF32_WARNING = "Please use the new API settings to control TF32 behavior"


def at_full_fp32(cuda: bool) -> bool:
    """Whether code runs now at the precision :func:`full_fp32_precision` sets: the flags it sets
    read alike (cuDNN's and CUDA matmuls' only for ``cuda``). A test's compiled call made
    otherwise is run again under it to be judged: its references are taken there."""
    outside = _precision_flags(cuda)
    with full_fp32_precision():
        inside = _precision_flags(cuda)
    # A per-operation precision of "none" follows the global one, which is read beside it.
    return all(flag == full or "none" in (flag, full) for flag, full in zip(outside, inside, strict=True))


def _precision_flags(cuda: bool) -> list[Any]:
    """The flags that decide the precision of fp32 matmuls (and, for ``cuda``, convolutions);
    None for one this torch lacks or refuses to read (set both ways, in disagreement)."""
    reads: list[Callable[[], Any]] = [
        torch.get_float32_matmul_precision,
        lambda: torch.backends.mkldnn.matmul.fp32_precision,  # type: ignore[attr-defined]
    ]
    if cuda:
        reads += [lambda: torch.backends.cudnn.allow_tf32, lambda: torch.backends.cuda.matmul.allow_tf32,
                  lambda: torch.backends.cudnn.conv.fp32_precision,  # type: ignore[attr-defined]
                  lambda: torch.backends.cuda.matmul.fp32_precision]
    flags = []
    with _legacy_tf32_api_quiet():
        for read in reads:
            try:
                flags.append(read())
            except (AttributeError, RuntimeError):
                flags.append(None)
    return flags


@contextlib.contextmanager
def _legacy_tf32_api_quiet() -> Iterator[None]:
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=LEGACY_TF32_WARNING, category=UserWarning)
        yield


@contextlib.contextmanager
def _fp32_precision(owners: Sequence[Any], precision: str | None) -> Iterator[None]:
    """Set the per-operation ``fp32_precision`` (TF32 API of torch >= 2.9) of ``owners`` for the
    block (None: leave it), and put back what each had on exit."""
    owners = [owner for owner in owners if hasattr(owner, "fp32_precision")]
    saved = [owner.fp32_precision for owner in owners]
    try:
        if precision is not None:
            for owner in owners:
                owner.fp32_precision = precision
        yield
    finally:
        for owner, previous in zip(owners, saved, strict=True):
            owner.fp32_precision = previous


def _legacy_tf32_flags_readable(read: Callable[[], Any]) -> bool:
    """False where a program set TF32 through the legacy and the per-operation API so that they
    disagree: torch then refuses to read the legacy flag, and only the per-operation one counts."""
    try:
        read()
    except RuntimeError:
        return False
    return True


def _cudnn_without_tf32() -> contextlib.AbstractContextManager[None]:
    cudnn = torch.backends.cudnn
    if not _legacy_tf32_flags_readable(lambda: cudnn.allow_tf32):
        return _fp32_precision([getattr(cudnn, "conv", None)], "ieee")
    # The flags context manager works while flags are frozen; None leaves a flag as it is. The
    # per-operation precision goes to "ieee" too: left unset, it inherits a "tf32" set for all.
    flags = dict.fromkeys(inspect.signature(cudnn.flags).parameters)
    flags["allow_tf32"] = False
    if "fp32_precision" in flags:
        flags["fp32_precision"] = "ieee"
    return cudnn.flags(**flags)


@contextlib.contextmanager
def _matmul_in_fp32() -> Iterator[None]:
    owners = [torch.backends.cuda.matmul, getattr(torch.backends.mkldnn, "matmul", None)]
    if not _legacy_tf32_flags_readable(torch.get_float32_matmul_precision):
        with _fp32_precision(owners, "ieee"):
            yield
        return
    saved = torch.get_float32_matmul_precision()
    # set_float32_matmul_precision overwrites the per-operation settings: they are put back after.
    with _fp32_precision(owners, None):
        torch.set_float32_matmul_precision("highest")
        try:
            yield
        finally:
            torch.set_float32_matmul_precision(saved)


def same_failure(verdict: GraphVerdict, kind: str, expected_error: str | None, pattern: str | None) -> bool:
    """Whether ``verdict`` fails the way the original case did (the minifier's interestingness)."""
    if verdict.failure != kind:
        return False
    if kind == FailureKind.ACCURACY:
        return True
    if pattern:
        return verdict.error is not None and re.search(pattern, verdict.error) is not None
    if expected_error is None or verdict.error is None:
        return True
    return normalized_error(verdict.error) == normalized_error(expected_error)


def devices_of(values: Sequence[Any]) -> set[torch.device]:
    return {v.device for v in values if isinstance(v, torch.Tensor) and v.device.type != "cpu"}


def synchronize(devices: set[torch.device]) -> None:
    """Wait for the kernels on ``devices``: they run asynchronously, and a device-side error
    must surface on the call that caused it, not at a later read."""
    for waited in devices:
        if waited.type == "cuda":
            torch.cuda.synchronize(waited)


def clone_values(values: Sequence[Any], keep_grad: bool = False) -> list[Any]:
    """Detached copies of the tensors (:func:`strided_copy`); ``keep_grad`` makes those that
    required grad leaves that do."""
    return [(strided_copy(v).requires_grad_(keep_grad and v.requires_grad) if isinstance(v, torch.Tensor) else v)
            for v in values]


def strided_copy(value: torch.Tensor) -> torch.Tensor:
    """A detached copy of ``value`` with its size, stride and storage offset, sharing no memory
    with it: compiled code assumes the layout it was compiled for (Inductor pads strides, a
    backward graph receives slices of saved activations), which ``clone`` makes contiguous where
    the tensor is not dense."""
    value = value.detach()
    if value.layout != torch.strided or type(value) is not torch.Tensor or value.is_quantized:
        return value.clone()
    extent = 1 + sum((size - 1) * stride for size, stride in zip(value.shape, value.stride(), strict=True)) \
        if value.numel() else 0
    span = value.new_empty(0).set_(value.untyped_storage(), 0, (value.storage_offset() + extent,), (1,))
    return value.new_empty(0).set_(span.clone().untyped_storage(), value.storage_offset(), value.shape, value.stride())


def traced_layout(gm: torch.fx.GraphModule, inputs: Sequence[Any]) -> list[Any] | None:
    """Copies of ``inputs`` laid out as ``gm``'s placeholders were traced, where a call's layout
    differs; None where none does (or the graph keeps no traced values). A backward graph is
    handed the activations its forward saved as Inductor laid them out (channels-last where it
    lays convolutions out so), while its ops were traced on eager's layout: a ``view`` traced
    there may not run eagerly on Inductor's. Only concrete sizes and strides are laid out."""
    traced = [node.meta.get("val") for node in gm.graph.nodes if node.op == "placeholder"]
    if len(traced) != len(inputs):
        return None
    relaid = list(inputs)
    for index, (value, fake) in enumerate(zip(inputs, traced, strict=True)):
        if not (isinstance(value, torch.Tensor) and isinstance(fake, torch.Tensor)
                and value.layout == torch.strided and fake.layout == torch.strided):
            continue
        stride = tuple(fake.stride())
        if not all(type(size) is int for size in (*fake.shape, *stride)) or tuple(fake.shape) != tuple(value.shape) \
                or stride == value.stride():
            continue
        copy = torch.empty_strided(value.shape, stride, dtype=value.dtype, device=value.device)
        relaid[index] = copy.copy_(value.detach()).requires_grad_(value.requires_grad)
    return relaid if any(new is not old for new, old in zip(relaid, inputs, strict=True)) else None


def widened(value: Any) -> Any:
    """``value`` for an fp64 run: a floating tensor in fp64 (keeping ``requires_grad``), a complex
    one in complex128, any other tensor a detached copy; anything else as it is."""
    if not isinstance(value, torch.Tensor):
        return value
    if value.is_floating_point():
        return value.detach().to(torch.float64).requires_grad_(value.requires_grad)
    if value.is_complex():
        return value.detach().to(torch.complex128)
    return value.detach().clone()


def draws_random(gm: Any) -> bool:
    """Whether a graph draws random numbers (dropout, ``torch.rand``...)."""
    graph = getattr(gm, "graph", None)
    tag = getattr(torch.Tag, "nondeterministic_seeded", None)  # a torch without it: none does
    return graph is not None and tag is not None and any(
        node.op == "call_function" and tag in getattr(node.target, "tags", ()) for node in graph.nodes)


@contextlib.contextmanager
def seeded_alike(gm: Any) -> Iterator[None]:
    """For a graph that draws random numbers, run the block from one seed, leaving the generators
    as they were: its eager, fp64 and compiled runs (compiled with Inductor's fallback_random,
    which draws from eager's generator) then draw alike."""
    if not draws_random(gm):
        yield
        return
    with generators_kept():
        torch.manual_seed(0)
        yield


def rng_devices() -> list[int]:
    """The CUDA devices whose generators exist yet."""
    return list(range(torch.cuda.device_count())) if torch.cuda.is_initialized() else []


def rng_states() -> list[torch.Tensor]:
    """The states of torch's default generators: the CPU's, then each CUDA device's."""
    return [torch.random.get_rng_state()] + [torch.cuda.get_rng_state(index) for index in rng_devices()]


def set_rng_states(states: list[torch.Tensor]) -> None:
    torch.random.set_rng_state(states[0])
    for index, state in zip(rng_devices(), states[1:], strict=False):
        # A device-side error (an assert in a compiled kernel) leaves the device unusable to this
        # process: its generator cannot be set, and nothing can draw from it any more.
        with contextlib.suppress(RuntimeError):
            torch.cuda.set_rng_state(state, index)


@contextlib.contextmanager
def generators_kept() -> Iterator[None]:
    """torch.random.fork_rng that survives a device lost inside the block, whose failure must
    surface as the block's own error, not as one from restoring a generator."""
    states = rng_states()
    try:
        yield
    finally:
        set_rng_states(states)


def differentiating(inputs: Sequence[Any]) -> bool:
    """Whether a torch-level graph is judged forward and backward: grad mode is on and some
    input requires grad, as in the training call it was captured from."""
    return torch.is_grad_enabled() and any(isinstance(v, torch.Tensor) and v.requires_grad for v in inputs)


def judges_backward(level: str, inputs: Sequence[Any]) -> bool:
    """Whether a graph of that level is judged forward and backward on ``inputs``: a torch-level
    graph in a training call (:func:`differentiating`). Its references and its compiled results
    must both be taken so, or they differ in length."""
    return level == DYNAMO and differentiating(inputs)


IN_PLACE_OPERATORS = frozenset({"setitem", "delitem", "iadd", "iand", "iconcat", "ifloordiv", "ilshift", "imatmul",
                                "imod", "imul", "ior", "ipow", "irshift", "isub", "itruediv", "ixor"})
"""The functions of ``operator`` that write into their first argument."""


def operator_name(target: Any) -> str | None:
    """The name of ``target`` in ``operator`` (``setitem``, ``iadd``...), or None for anything
    else: fx records ``operator``'s functions under their C module, ``_operator``."""
    if getattr(target, "__module__", None) != "_operator":
        return None
    return getattr(target, "__name__", None)


def _may_write(module: Callable[..., Any]) -> bool:
    """Whether a call of ``module`` may write into its arguments: anything but a graph module
    whose graph calls nothing that writes one (:func:`may_write_inputs`) may."""
    return not isinstance(module, torch.fx.GraphModule) or may_write_inputs(module)


def may_write_inputs(gm: Any) -> bool:
    """Whether a graph calls anything that may write into an argument (:func:`writes_an_argument`)."""
    return any(writes_an_argument(node) for node in gm.graph.nodes)


def writes_an_argument(node: torch.fx.Node) -> bool:
    """Whether a node may write into an argument: an op whose schema writes one, an in-place
    operator, a method or submodule, or a function with no schema to tell (a torch-level
    graph's)."""
    if node.op in ("call_method", "call_module"):
        return True
    if node.op != "call_function":
        return False
    name = operator_name(node.target)
    if name is not None:
        return name in IN_PLACE_OPERATORS
    schema = getattr(node.target, "_schema", None)
    return schema is None or any(argument.alias_info is not None and argument.alias_info.is_write
                                 for argument in schema.arguments)


def mutated_inputs(module: Any, inputs: Sequence[Any]) -> list[int]:
    """The positions of the tensor inputs that an eager run of ``module`` (a graph) writes into: what
    a graph writes into its inputs is a result, judged as its outputs are. An eager run finds them
    only where the graph may write into an argument (:func:`may_write_inputs`)."""
    if not may_write_inputs(module):
        return []
    args = clone_values(inputs)
    with torch.no_grad(), seeded_alike(module):
        module(*args)
    return [index for index, (before, after) in enumerate(zip(inputs, args, strict=True))
            if isinstance(before, torch.Tensor) and isinstance(after, torch.Tensor) and changed(before, after)]


def changed(before: torch.Tensor, after: torch.Tensor) -> bool:
    """Whether a call changed a tensor in place: its shape, or any element (a NaN that stayed a NaN
    is no change, which ``torch.equal`` would call one)."""
    before, after = before.detach(), after.detach()
    if before.shape != after.shape or before.dtype != after.dtype:
        return True
    if torch.equal(before, after):
        return False
    if not (before.is_floating_point() or before.is_complex()):
        return True
    return not bool(((before == after) | (before.isnan() & after.isnan())).all())


def run_graph(module: Callable[..., Any], inputs: Sequence[Any], backward: bool = False,
              mutated: Sequence[int] = (), copied: bool = False) -> list[Any]:
    """The outputs of ``module`` on copies of ``inputs``; with ``backward``, followed by the
    gradients of the summed floating outputs with respect to every input that requires grad; then
    the copies of the inputs at the positions ``mutated`` (:func:`mutated_inputs`) as the call left
    them. ``copied``: ``inputs`` are already such copies, made for this run alone (detached, the
    floating ones that require grad leaves that do), and are used as they are."""
    if not backward:
        # A graph that writes into no argument runs on the inputs themselves: a copy of them
        # (a model's weights) would sit beside the copy the caller keeps.
        args = list(inputs) if copied or not _may_write(module) else clone_values(inputs)
        with torch.no_grad():
            return [*module(*args), *(args[index] for index in mutated)]
    args = list(inputs) if copied else clone_values(inputs, keep_grad=True)
    written = [args[index] for index in mutated]
    with torch.enable_grad():
        outputs = list(module(*args))
        wrt = [a for a in args if isinstance(a, torch.Tensor) and a.requires_grad]
        floating = [o for o in outputs if isinstance(o, torch.Tensor) and o.requires_grad]
        if not floating:
            return [o.detach() if isinstance(o, torch.Tensor) else o for o in [*outputs, *written]]
        loss = torch.stack([o.float().sum() for o in floating]).sum()
        grads = torch.autograd.grad(loss, wrt, allow_unused=True)
    return [o.detach() if isinstance(o, torch.Tensor) else o for o in outputs] + [
        g if g is not None else torch.zeros_like(a) for a, g in zip(wrt, grads, strict=True)] + [
        value.detach() for value in written]


def reference_outputs(
    module: Callable[..., Any], inputs: Sequence[Any], backward: bool = False, mutated: Sequence[int] = (),
) -> tuple[list[Any], list[Any] | None]:
    """Eager outputs in the original dtype, and in fp64 (None where the graph cannot run in fp64)."""
    eager, fp64, _ = reference_results(module, inputs, backward, mutated)
    return eager, fp64


def reference_results(
    module: Callable[..., Any], inputs: Sequence[Any], backward: bool = False, mutated: Sequence[int] = (),
) -> tuple[list[Any], list[Any] | None, Exception | None]:
    """:func:`reference_outputs`, and what stopped the fp64 run where it could not run (None
    where it ran): a check says why it judged without an fp64 reference."""
    with seeded_alike(module):
        eager = run_graph(module, inputs, backward, mutated)
    with seeded_alike(module):
        return eager, *fp64_results(module, inputs, backward, mutated)


UNWRITTEN_FILLS = (float("nan"), 7.0)
"""What memory no op wrote holds in the two runs that find the results depending on it: unlike
values (NaN spreads through nearly every op), in integer tensors 0 and 7."""


def unwritten_elements(
    module: Callable[..., Any], inputs: Sequence[Any], backward: bool = False, mutated: Sequence[int] = (),
) -> list[torch.Tensor | None] | None:
    """Per output of ``module`` (as :func:`run_graph` returns them), the elements that depend on
    memory no op wrote (``empty``, ``empty_like``, ``empty_strided``, ``new_empty`` and views of
    them, until written): they hold whatever the allocator gave, in eager and compiled code alike,
    and are no values to judge. None when ``module`` allocates no such memory, or cannot run."""
    runs = []
    for fill in UNWRITTEN_FILLS:
        allocated: list[int] = []
        try:
            with seeded_alike(module), filling_unwritten(fill, allocated):
                runs.append(run_graph(module, inputs, backward, mutated))
        except Exception:
            return None
        if not allocated:
            return None
    return [unwritten_mask(first, second) for first, second in zip(*runs, strict=True)]


def fp64_outputs(module: Callable[..., Any], inputs: Sequence[Any], backward: bool = False,
                 mutated: Sequence[int] = ()) -> list[Any] | None:
    """The outputs of ``module`` run in fp64, or None where it cannot run in fp64."""
    return fp64_results(module, inputs, backward, mutated)[0]


def fp64_results(module: Callable[..., Any], inputs: Sequence[Any], backward: bool = False,
                 mutated: Sequence[int] = ()) -> tuple[list[Any] | None, Exception | None]:
    """:func:`fp64_outputs`, and the error that stopped the fp64 run (None where it ran)."""
    try:
        with float64_everywhere():
            if isinstance(module, torch.fx.GraphModule) and not backward and not mutated:
                return run_graph(_widening_at_first_use(module), inputs, copied=True), None
            # Widened copies serve as the run's own: a second copy would double the fp64 inputs
            # (a graph's inputs hold a model's weights), the most memory a check needs.
            return run_graph(module, [_widened_copy(v, backward) for v in inputs], backward, mutated,
                             copied=True), None
    except Exception as error:
        return None, error


def _widening_at_first_use(gm: torch.fx.GraphModule) -> torch.fx.GraphModule:
    """``gm`` taking its inputs as they are and widening each (:func:`_widened_copy`) right before
    the first op that reads it, every use reading the widened value. A graph module's code drops
    each value after its last use: an fp64 run then holds the widened inputs of a few ops at a
    time (a layer's weights), not a widened copy of every input (all of a model's weights, twice
    their fp32 size). Its results are those of the graph run on widened copies."""
    graph = copy.deepcopy(gm.graph)
    order = {node: position for position, node in enumerate(graph.nodes)}
    for node in list(graph.find_nodes(op="placeholder")):
        if not node.users:
            continue
        with graph.inserting_before(min(node.users, key=order.__getitem__)):
            wide = graph.call_function(_widened_copy, (node, False))
        node.replace_all_uses_with(wide, delete_user_cb=lambda user, wide=wide: user is not wide)
    return torch.fx.GraphModule(gm, graph)


def _widened_copy(value: Any, keep_grad: bool) -> Any:
    """``value`` widened (:func:`widened`) as :func:`run_graph` copies an input: a tensor in fp64
    or complex128 already, which widening leaves in its own storage, is copied."""
    wide = widened(value)
    if not isinstance(wide, torch.Tensor):
        return wide
    if wide.dtype == value.dtype and (wide.is_floating_point() or wide.is_complex()):
        return clone_values([wide], keep_grad)[0]
    return wide.requires_grad_(keep_grad and wide.requires_grad)


def compare_graph_outputs(
    outputs: Sequence[Any],
    eager: Sequence[Any],
    fp64: Sequence[Any] | None,
    tol: float,
    check_non_float: bool,
    name: str = "graph_out",
    unwritten: Sequence[torch.Tensor | None] | None = None,
    mutated: Sequence[int] = (),
) -> list[LeafResult]:
    """Judge each tensor a compiled graph returned against the graph's own eager and fp64 results,
    but for the elements ``unwritten`` marks (:func:`unwritten_elements`); the last ones are the
    inputs at the positions ``mutated``, as :func:`run_graph` returns them. Compiled code that
    returns another number of results than eager (an op of several results whose graph node
    lists fewer) fails on that, as a wrong shape does."""
    if len(outputs) != len(eager):
        return [LeafResult(name, (), "", False, "metadata",
                           detail=f"compiled returned {len(outputs)} results, eager {len(eager)}")]
    masks = list(unwritten) if unwritten is not None else [None] * len(eager)
    returned = len(eager) - len(mutated)
    paths = [f"{name}[{index}]" for index in range(returned)] + [mutated_input_path(index) for index in mutated]
    return [
        compare_tensor(path, written_only(result, mask), written_only(expected, mask),
                       written_only(fp64[index], mask) if fp64 is not None else None, tol, check_non_float)
        for index, (path, result, expected, mask) in enumerate(zip(paths, outputs, eager, masks, strict=True))
        if isinstance(expected, torch.Tensor) and isinstance(result, torch.Tensor)
    ]


def mutated_input_path(position: int) -> str:
    """How a graph's input that it writes into is named among the judged results."""
    return f"graph_in[{position}] (mutated in place)"


def judge_graph(
    gm: torch.fx.GraphModule,
    inputs: Sequence[Any],
    tol: float,
    check_non_float: bool,
    references: tuple[list[Any], list[Any] | None] | None = None,
    compiler: Callable[[torch.fx.GraphModule, Sequence[Any]], Callable[..., Any]] | None = None,
    level: str = POST_AOT,
) -> GraphVerdict:
    """Compile ``gm`` with Inductor (a torch-level graph: through the whole stack; or with
    ``compiler``), run it on ``inputs`` and judge every output (a torch-level graph in a training
    call: every gradient too) and every input it writes into. ``references``: the eager and fp64
    results as :func:`reference_outputs` gives them, the inputs :func:`mutated_inputs` finds
    included.

    Non-floating outputs count only with ``check_non_float``: a minified candidate must keep a
    floating deviation, so a flipped bool mask cannot steer the reduction.
    """
    with full_fp32_precision():
        return _judge(gm, inputs, tol, check_non_float, references, compiler, level)


def _judge(
    gm: torch.fx.GraphModule,
    inputs: Sequence[Any],
    tol: float,
    check_non_float: bool,
    references: tuple[list[Any], list[Any] | None] | None,
    compiler: Callable[[torch.fx.GraphModule, Sequence[Any]], Callable[..., Any]] | None,
    level: str,
) -> GraphVerdict:
    backward = judges_backward(level, inputs)
    try:
        mutated = mutated_inputs(gm, inputs)
        eager, fp64 = references if references is not None else reference_outputs(gm, inputs, backward, mutated)
    except Exception as error:
        return GraphVerdict(FailureKind.EAGER_ERROR, error=error_signature(error))
    try:
        if compiler is None:
            compiler = compile_dynamo_graph if level == DYNAMO else compile_graph
        compiled = compiler(gm, clone_values(inputs))
    except Exception as error:
        return GraphVerdict(FailureKind.COMPILE_ERROR, error=error_signature(error))
    try:
        # A torch-level graph compiles on its first call: errors there are the compiler's too.
        with seeded_alike(gm):
            outputs = run_graph(compiled, inputs, backward, mutated)
        synchronize(devices_of([*inputs, *outputs]))
    except Exception as error:
        return GraphVerdict(FailureKind.RUNTIME_ERROR, error=error_signature(error))
    leaves = compare_graph_outputs(outputs, eager, fp64, tol, check_non_float,
                                   unwritten=unwritten_elements(gm, inputs, backward, mutated), mutated=mutated)
    failed = any(not leaf.passed for leaf in leaves)
    return GraphVerdict(FailureKind.ACCURACY if failed else None, leaves, reference="fp64" if fp64 is not None else "cosine")
