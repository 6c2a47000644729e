"""Intercept the graphs Inductor lowers, with their real runtime inputs and the compiled code."""

from __future__ import annotations

import contextlib
import copy
import functools
import itertools
import weakref
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.fx

from pytest_torchcompile.judging.call_site import user_frame
from pytest_torchcompile.judging.copies import clone_values
from pytest_torchcompile.judging.dynamo_level import names_every_op, writes_into_constants
from pytest_torchcompile.judging.host_copy import HostCopy, copy_to_host, graph_constants
from pytest_torchcompile.judging.judge import devices_of, synchronize
from pytest_torchcompile.judging.mutation import changed
from pytest_torchcompile.judging.seeding import draws_random, rng_states
from pytest_torchcompile.torch_internals.compiling import compile_errors_suppressed
from pytest_torchcompile.torch_internals.config import inductor_config_source
from pytest_torchcompile.torch_internals.interception import (
    capturing_backend,
    outside_dispatch_modes,
)
from pytest_torchcompile.torch_internals.ops import attribute_read
from pytest_torchcompile.torch_internals.values import concrete_int, nested_int, symbolic_sizes

GraphCallObserver = Callable[["CapturedGraph", list[Any], Any, list[Any]], None]
"""Told of every call of a captured graph: (graph, cloned inputs, outputs, the inputs themselves as
the call left them: what it wrote into them)."""

DynamoCallObserver = Callable[["DynamoGraph", list[Any], Any, list[Any]], None]
"""Told of every new-shape call of a torch-level graph: (graph, cloned inputs, outputs, the inputs
themselves as the call left them)."""

LoweringObserver = Callable[["CapturedGraph"], None]
"""Told of every graph Inductor receives, before it compiles it."""

OP_NODES = ("call_function", "call_method", "call_module")
"""The node kinds that compute: post-AOT graphs hold only the first, Dynamo's graphs all three."""


def op_count(gm: torch.fx.GraphModule) -> int:
    return sum(1 for node in gm.graph.nodes if node.op in OP_NODES)


def private_copy(gm: torch.fx.GraphModule) -> torch.fx.GraphModule:
    """A copy for Inductor to compile: its post-grad passes rewrite the graph they compile in
    place, and the graph they were given must stay what it was (to be judged or written out)."""
    return torch.fx.GraphModule(gm, copy.deepcopy(gm.graph))


def plain_graph(gm: torch.fx.GraphModule) -> tuple[torch.fx.Graph, dict[str, Any]]:
    """``gm``'s graph without its nodes' metadata (Dynamo's holds fake tensors and the sources of
    real values), its attribute reads spelled as such (:func:`ops.attribute_read`), and the
    constants and submodules it uses."""
    graph = torch.fx.Graph()
    env: dict[torch.fx.Node, torch.fx.Node] = {}
    for node in gm.graph.nodes:
        env[node] = graph.node_copy(node, env.__getitem__)
        env[node].meta = {}
        attribute = attribute_read(node.target) if node.op == "call_function" else None
        if attribute is not None:
            env[node].target, env[node].args = getattr, (env[node].args[0], attribute)
    return graph, graph_constants(gm, ("get_attr", "call_module"))


@dataclass
class CapturedGraph:
    """One post-AOT graph handed to Inductor and what happened to it."""

    index: int
    gm: torch.fx.GraphModule
    kind: str
    symbolic_sizes: list[list[str] | None]
    location: str
    compiled: Callable[..., Any] | None = None
    compile_error: BaseException | None = None
    compile_error_suppressed: bool = False
    """Dynamo ran the frame eagerly where the compile failed: the error reached no code of the test."""
    runtime_error: BaseException | None = None
    calls: list[list[Any]] = field(default_factory=list)
    input_specs: list[Any] = field(default_factory=list)
    config_source: str = ""
    host_copy: HostCopy | None = None
    """The graph and inputs of its latest new-shape call in host memory, where they live on an
    accelerator: a device-side error (an assert in a kernel) leaves the whole device unreadable
    to this process, and its repro must still be written."""
    rng_before_call: list[torch.Tensor] | None = None
    """For a graph that draws random numbers: the generators' states before its latest new-shape
    call, so that its eager references can draw the same numbers."""
    dynamo: DynamoGraph | None = None
    """The torch-level graph this one was lowered from, where the compile was seen starting (a
    backward graph, compiled at its first call, by the compile its forward graph came from)."""
    watch_round: int = 0
    """The watch (:meth:`GraphCapture.watch`) whose calls :attr:`calls` and the errors hold."""
    unrecordable: str | None = None
    """Why its calls are neither recorded nor judged (:func:`unrecordable`): they run as compiled."""

    def forget_calls(self) -> None:
        self.calls.clear()
        self.runtime_error = None
        self.host_copy = None
        self.rng_before_call = None

    @property
    def runtime_inputs(self) -> list[Any] | None:
        return self.calls[0] if self.calls else None

    def synthesized_inputs(self, seed: int = 0) -> list[Any]:
        """Random inputs of the traced shapes, for a graph that never ran (it failed to compile)."""
        generator = torch.Generator().manual_seed(seed)
        values: list[Any] = []
        for spec in self.input_specs:
            if not isinstance(spec, TensorSpec):
                values.append(spec)
                continue
            storage = torch.randn(spec.storage_numel(), generator=generator, dtype=torch.float64)
            if spec.dtype == torch.bool:
                storage = storage > 0
            elif not (spec.dtype.is_floating_point or spec.dtype.is_complex):
                storage = (storage.abs() * 4).floor()
            values.append(
                torch.as_strided(storage.to(spec.dtype), spec.shape, spec.stride).to(spec.device)
            )
        return values

    @functools.cached_property
    def has_random_ops(self) -> bool:
        """Whether the graph draws random numbers (a scan of its ops, done once)."""
        return draws_random(self.gm)

    @property
    def op_count(self) -> int:
        return op_count(self.gm)

    @property
    def label(self) -> str:
        return f"graph {self.index} ({self.kind}) from {self.location}"


@dataclass
class DynamoGraph:
    """One torch-level graph Dynamo handed to Inductor (before AOT autograd and decompositions),
    with the real inputs of its calls and the post-AOT graphs lowered from it."""

    index: int
    graph: torch.fx.Graph
    owned: dict[str, Any]
    location: str
    calls: list[list[Any]] = field(default_factory=list)
    lowered: list[CapturedGraph] = field(default_factory=list)
    compiled: Callable[..., Any] | None = None
    """What the compile made of it (AOT autograd's function over Inductor's kernels): the code the
    test's calls run, forward and backward."""
    rng_before_call: list[torch.Tensor] | None = None
    """Where a graph lowered from it draws random numbers: the generators' states before its
    latest new-shape call, so that a compile of it aside can draw what eager draws there."""
    watch_round: int = 0
    """The watch (:meth:`GraphCapture.watch`) whose calls :attr:`calls` holds."""

    def forget_calls(self) -> None:
        self.calls.clear()
        self.rng_before_call = None

    @functools.cached_property
    def gm(self) -> torch.fx.GraphModule:
        # Built on first use, not while Dynamo compiles: torch.compile never traces the code of
        # a module made during a compilation.
        return torch.fx.GraphModule(self.owned, self.graph)

    @property
    def label(self) -> str:
        return f"torch-level graph {self.index} from {self.location}"

    @property
    def lowers_random_ops(self) -> bool:
        """Whether a post-AOT graph lowered from it draws random numbers."""
        return any(lowered.has_random_ops for lowered in self.lowered)

    @property
    def records_calls(self) -> bool:
        """Whether its calls can be recorded: those of every graph lowered from it can
        (:func:`unrecordable`)."""
        return all(lowered.unrecordable is None for lowered in self.lowered)

    @property
    def config_source(self) -> str:
        """The Inductor config its post-AOT graphs were compiled under (the mode's included)."""
        return self.lowered[0].config_source if self.lowered else inductor_config_source()

    def judgeable(self) -> bool:
        """Whether its calls can be judged at this level: its post-AOT graphs are known and draw no
        random numbers (a recompile would draw anew), it writes into none of the tensors it holds
        (its eager and fp64 runs would write into the user's own), and a repro file can hold it."""
        return (
            bool(self.lowered)
            and not self.lowers_random_ops
            and not writes_into_constants(self.gm)
            and self.reproducible_standalone()
        )

    def reproducible_standalone(self) -> bool:
        """Whether a repro file can hold it: no nn.Module calls, and every op a torch or builtin
        function that the file's code can name."""
        return names_every_op(self.gm)


@dataclass(frozen=True)
class TensorSpec:
    shape: tuple[int, ...]
    stride: tuple[int, ...]
    dtype: torch.dtype
    device: torch.device

    def storage_numel(self) -> int:
        if any(size == 0 for size in self.shape):
            return 0
        return 1 + sum(
            (size - 1) * step for size, step in zip(self.shape, self.stride, strict=True)
        )


def input_spec(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return TensorSpec(
            tuple(concrete_int(s) for s in value.shape),
            tuple(concrete_int(s) for s in value.stride()),
            value.dtype,
            value.device,
        )
    if isinstance(value, torch.SymInt):
        return concrete_int(value)
    return value


def unrecordable(example_inputs: Sequence[Any]) -> str | None:
    """Why a graph's calls cannot be recorded and judged, or None: meta tensors among its inputs
    (they hold no values), or jagged sizes (a nested tensor's parts, whose sizes have no int
    value to copy or write out)."""
    for value in example_inputs:
        if isinstance(value, torch.Tensor) and value.device.type == "meta":
            return "its inputs are meta tensors, which hold no values to judge"
        sizes = [*value.shape, *value.stride()] if isinstance(value, torch.Tensor) else [value]
        if any(nested_int(size) for size in sizes):
            return "its inputs have jagged sizes (a nested tensor's), which have no int value"
    return None


def input_signature(values: Sequence[Any]) -> tuple[Any, ...]:
    """The shapes (and non-tensor values) of a graph call: calls alike in it are judged once."""
    return tuple(tuple(v.shape) if isinstance(v, torch.Tensor) else v for v in values)


def _copies_by_id(
    args: Sequence[Any], copies: Sequence[Any]
) -> dict[int, tuple[torch.Tensor, torch.Tensor]]:
    """The copies a torch-level call made of its tensor inputs, each with the input, by the
    input's id (:attr:`GraphCapture._copies`)."""
    return {
        id(value): (value, copied)
        for value, copied in zip(args, copies, strict=False)
        if isinstance(value, torch.Tensor)
    }


def _plain_strided(tensor: torch.Tensor) -> bool:
    """Whether ``tensor`` is a plain, strided, unquantized tensor, whose memory a copy holds."""
    return (
        type(tensor.detach()) is torch.Tensor
        and tensor.layout == torch.strided
        and not tensor.is_quantized
    )


def _alike(value: torch.Tensor, other: torch.Tensor) -> bool:
    """Whether ``other`` holds what a copy of ``value`` would: its layout and its elements."""
    return (
        _plain_strided(value)
        and _plain_strided(other)
        and value.dtype == other.dtype
        and value.device == other.device
        and value.shape == other.shape
        and value.stride() == other.stride()
        and value.storage_offset() == other.storage_offset()
        and (value.is_neg(), value.is_conj()) == (other.is_neg(), other.is_conj())
        and not changed(value, other)
    )


def _graph_kind(kwargs: dict[str, Any]) -> str:
    """Which of a training step's graphs, or an inference graph, Inductor was handed (its
    compile's keyword arguments)."""
    if kwargs.get("is_backward"):
        return "backward"
    return "inference" if kwargs.get("is_inference") else "forward"


class GraphCapture:
    """Collects every graph compiled through :meth:`hook`.

    ``max_calls_kept`` bounds how many distinct input-shape signatures of one graph keep their
    inputs (dynamic shapes call one graph at several sizes).
    """

    def __init__(
        self,
        observer: GraphCallObserver | None = None,
        max_calls_kept: int = 4,
        dynamo_observer: DynamoCallObserver | None = None,
        lowering_observer: LoweringObserver | None = None,
        originals: Sequence[tuple[torch.Tensor, torch.Tensor]] = (),
        watching: bool = True,
    ) -> None:
        self.graphs: list[CapturedGraph] = []
        self.dynamo_graphs: list[DynamoGraph] = []
        self._observer = observer
        self._dynamo_observer = dynamo_observer
        self._lowering_observer = lowering_observer
        self._max_calls_kept = max_calls_kept
        self._counter = itertools.count()
        self._dynamo_counter = itertools.count()
        self._compiling: DynamoGraph | None = None
        self._owners: weakref.WeakValueDictionary[Any, DynamoGraph] = weakref.WeakValueDictionary()
        """The torch-level graph each of Inductor's compiles (its ``graph_id``) started from, while
        Dynamo keeps what it compiled to (a backward graph compiles at its first call)."""
        self._originals = {id(tensor): (tensor, original) for tensor, original in originals}
        """Tensors calls receive (a compiled copy's weights), each with the one it was copied from,
        which a call's record shares while the two are alike instead of copying it once more."""
        self._copies: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}
        """While a torch-level graph's call runs, the copies it made of its inputs (each with the
        input, by the input's id): its post-AOT graph, called before anything writes into them,
        receives the same tensors (a model's weights) and shares those copies."""
        self.watching = watching
        """Whether calls are recorded and observed now. Outside a :meth:`watch`, what was compiled
        through this capture runs as compiled, unseen; what compiles is still recorded, so that a
        later watch judges the calls it makes of it."""
        self._round = 0

    @contextlib.contextmanager
    def watch(
        self,
        observer: GraphCallObserver | None,
        dynamo_observer: DynamoCallObserver | None,
        lowering_observer: LoweringObserver | None,
    ) -> Iterator[None]:
        """Record and observe calls while the block runs (one test's call), of code compiled in
        it and of code compiled earlier, which Dynamo serves from its cache as a plain run does:
        each graph the block calls is listed in :attr:`graphs` (or :attr:`dynamo_graphs`) on its
        first call, numbered in the order the block meets it. What the block recorded stays until
        :meth:`end_watch`, for the judging after it."""
        self.end_watch()
        self._round += 1
        self._counter, self._dynamo_counter = itertools.count(), itertools.count()
        self._observer, self._dynamo_observer, self._lowering_observer = (
            observer,
            dynamo_observer,
            lowering_observer,
        )
        self.watching = True
        try:
            yield
        finally:
            self.watching = False
            self._observer = self._dynamo_observer = self._lowering_observer = None

    def stop(self) -> None:
        """Stop recording for good (a compile aside, done): what was compiled through this capture
        runs on unseen where Dynamo serves it again, and its records hold no copies."""
        self.watching = False
        self.end_watch()

    def end_watch(self) -> None:
        """Drop what the last watch recorded (copies of the inputs of its calls): the compiled code
        lives on in Dynamo's cache, and these copies must not live with it."""
        self.forget_calls()
        self.graphs, self.dynamo_graphs = [], []

    def _enlist(
        self, record: CapturedGraph | DynamoGraph, listed: list[Any], counter: Iterator[int]
    ) -> None:
        """List a graph the running watch calls that was compiled before it started (calls of an
        earlier watch no longer count)."""
        if record.watch_round != self._round:
            record.watch_round = self._round
            record.forget_calls()
            record.index = next(counter)
            listed.append(record)

    def hook(
        self,
        gm: torch.fx.GraphModule,
        example_inputs: Sequence[Any],
        kwargs: dict[str, Any],
        compile_fn: Callable[[], Any],
    ) -> Any:
        owner = self._owner(kwargs.get("graph_id"))
        unrecorded = unrecordable(example_inputs)
        record = CapturedGraph(
            index=next(self._counter),
            gm=private_copy(gm),
            kind=_graph_kind(kwargs),
            symbolic_sizes=symbolic_sizes(example_inputs),
            location=user_frame(),
            input_specs=[] if unrecorded else [input_spec(v) for v in example_inputs],
            config_source=inductor_config_source(cpu_threads=not devices_of(example_inputs)),
            dynamo=owner,
            # Compiled outside a watch: listed by the first call a watch makes of it.
            watch_round=self._round if self.watching else -1,
            unrecordable=unrecorded,
        )
        if owner is not None:
            owner.lowered.append(record)
        if self.watching:
            self.graphs.append(record)
            if self._lowering_observer is not None:
                self._lowering_observer(record)
        try:
            compiled = compile_fn()
        except BaseException as error:
            record.compile_error = error
            record.compile_error_suppressed = compile_errors_suppressed()
            raise
        record.compiled = compiled
        # Dynamo guards on devices: every call of this compiled graph finds its inputs there.
        return self._wrap(record, compiled, devices_of(example_inputs))

    def _owner(self, graph_id: Any) -> DynamoGraph | None:
        """The torch-level graph an Inductor compile of id ``graph_id`` was lowered from, if any.

        A backward graph compiles at its first call, after its torch-level graph's compile
        returned: Inductor's id of the compile, which its forward graph had, tells whose it is."""
        owner = self._compiling if self._compiling is not None else self._owners.get(graph_id)
        if owner is not None and graph_id is not None:
            self._owners[graph_id] = owner
        return owner

    def _wrap(self, record: CapturedGraph, compiled: Any, devices: set[torch.device]) -> Any:
        capture = self

        def run(args: list[Any]) -> Any:
            if not capture.watching:
                return compiled(args)
            capture._enlist(record, capture.graphs, capture._counter)
            if record.unrecordable is not None:
                return compiled(args)
            with outside_dispatch_modes():
                fresh, inputs = capture._note_call(record.calls, args)
                if fresh:
                    record.host_copy = copy_to_host(record.gm, inputs)
            if fresh and record.has_random_ops:
                record.rng_before_call = rng_states()
            # Held here: the boxed call empties the list it is given.
            given = list(args)
            try:
                outputs = compiled(args)
                synchronize(devices)
            except BaseException as error:
                record.runtime_error = error
                raise
            if fresh and capture._observer is not None:
                with outside_dispatch_modes():
                    capture._observer(record, inputs, outputs, given)
            return outputs

        run._boxed_call = True  # type: ignore[attr-defined]
        return run

    def _note_call(
        self, calls: list[list[Any]], args: Sequence[Any], keep_grad: bool = False
    ) -> tuple[bool, list[Any]]:
        """Whether a call's input shapes are new to its graph and, if so, copies of its inputs,
        kept among the graph's ``calls`` up to the limit."""
        signature = input_signature(args)
        # Shapes already recorded were judged then: a training loop pays no copy per step.
        if any(input_signature(call) == signature for call in calls):
            return False, []
        inputs = [self._shared_copy(value, keep_grad) for value in args]
        if len(calls) < self._max_calls_kept:
            calls.append(inputs)
        return True, inputs

    def _shared_copy(self, value: Any, keep_grad: bool) -> Any:
        """A copy of ``value`` as :func:`clone_values` makes it, sharing the memory of the copy
        the running torch-level call made of the same tensor, or of its original while alike
        (compared only there: a torch-level call's copy is alike by construction)."""
        copied = self._copies.get(id(value))
        if copied is None or copied[0] is not value:
            copied = self._originals.get(id(value))
            if copied is None or copied[0] is not value or not _alike(value, copied[1]):
                return clone_values([value], keep_grad=keep_grad)[0]
        return copied[1].detach().requires_grad_(keep_grad and value.requires_grad)

    def dynamo_hook(
        self, gm: torch.fx.GraphModule, example_inputs: Sequence[Any], compile_fn: Callable[[], Any]
    ) -> Any:
        """Record the torch-level graph and, on each call of what it compiles to, its real inputs;
        post-AOT graphs lowered while it compiles are linked to it."""
        record = DynamoGraph(
            next(self._dynamo_counter),
            *plain_graph(gm),
            user_frame(),
            watch_round=self._round if self.watching else -1,
        )
        if self.watching:
            self.dynamo_graphs.append(record)
        outer, self._compiling = self._compiling, record
        try:
            compiled = compile_fn()
        finally:
            self._compiling = outer
        record.compiled = compiled
        capture = self

        def run(*args: Any) -> Any:
            if not capture.watching:
                return compiled(*args)
            capture._enlist(record, capture.dynamo_graphs, capture._dynamo_counter)
            if not record.records_calls:
                return compiled(*args)
            fresh, inputs = capture._note_call(record.calls, args, keep_grad=True)
            if fresh and record.lowers_random_ops:
                record.rng_before_call = rng_states()
            outer, capture._copies = capture._copies, _copies_by_id(args, inputs)
            try:
                outputs = compiled(*args)
            finally:
                capture._copies = outer
            if fresh and capture._dynamo_observer is not None:
                capture._dynamo_observer(record, inputs, outputs, list(args))
            return outputs

        return run

    def forget_calls(self) -> None:
        """Start a new check with the same compiled code: earlier calls and errors no longer count."""
        for graph in self.graphs:
            graph.forget_calls()
        for dynamo_graph in self.dynamo_graphs:
            dynamo_graph.forget_calls()

    def backend(
        self,
        mode: str | None = None,
        options: dict[str, Any] | None = None,
        random_config: dict[str, Any] | None = None,
    ) -> Callable[..., Any]:
        """A ``torch.compile`` backend: Inductor, with every lowered graph captured here; those
        that draw random numbers compile under the Inductor config patches ``random_config``."""
        return capturing_backend(self.hook, mode, options, self.dynamo_hook, random_config)
