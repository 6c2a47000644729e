"""Cut candidate graphs out of one graph, each fed with the real values the whole graph
computed: the minifier's candidates and the masked-deviation probe are both such cuts."""

from __future__ import annotations

import functools
import operator
import re
from collections.abc import Sequence
from typing import Any

import torch
import torch.fx

from pytest_torchcompile.judging.capture import OP_NODES
from pytest_torchcompile.judging.copies import clone_values, strided_copy
from pytest_torchcompile.judging.mutation import may_write_inputs, writes_an_argument
from pytest_torchcompile.torch_internals.graph_compile import visible_outputs, with_visible_outputs
from pytest_torchcompile.torch_internals.ops import (
    can_mask_a_deviation,
    decomposed_from,
    is_view_op,
)

Selection = frozenset[str]
"""A candidate: the names of the units (see :class:`GraphSlicer`) it keeps."""


ROOTS_TRIED_ALONE = 3
"""How many places where a deviation starts are tried, alone and with their neighbours."""


class _RecordingInterpreter(torch.fx.Interpreter):
    def __init__(self, gm: torch.fx.GraphModule) -> None:
        super().__init__(gm)
        self.values: dict[torch.fx.Node, Any] = {}

    def run_node(self, n: torch.fx.Node) -> Any:
        self.values[n] = result = super().run_node(n)
        return result


def _unit_of_each(nodes: Sequence[torch.fx.Node]) -> dict[torch.fx.Node, str]:
    """The unit (see :class:`GraphSlicer`) of each op node, named after its op: a ``getitem``
    that unpacks another unit's result belongs to that unit."""
    unit_of: dict[torch.fx.Node, str] = {}
    for node in nodes:
        if node.op not in OP_NODES:
            continue
        source = node.args[0] if node.args else None
        unpacks = (
            node.target is operator.getitem
            and isinstance(source, torch.fx.Node)
            and source in unit_of
        )
        unit_of[node] = unit_of[source] if unpacks else node.name  # type: ignore[index]
    return unit_of


def _consumers_of_each(producers: dict[str, set[str]]) -> dict[str, set[str]]:
    """The units that read a value of each unit, from the units each reads of (``producers``)."""
    consumers: dict[str, set[str]] = {unit: set() for unit in producers}
    for unit, read in producers.items():
        for producer in read:
            consumers[producer].add(unit)
    return consumers


class GraphSlicer:
    """Cuts candidate graphs out of one graph, feeding every cut edge with its real value.

    The unit of reduction is an op together with the ``getitem`` nodes unpacking its tuple result
    (a tuple cannot be fed in or returned on its own). Units are named after their op node.
    """

    def __init__(self, gm: torch.fx.GraphModule, inputs: Sequence[Any] | None) -> None:
        """``inputs`` None: the values are the fake ones Inductor's graphs are traced with (node
        metadata), enough to build a probe (:meth:`probe`) before any input exists, not to feed a
        cut."""
        self.gm = gm
        nodes = list(gm.graph.nodes)
        self._position = {node: index for index, node in enumerate(nodes)}
        self.unit_of = _unit_of_each(nodes)
        self.units: dict[str, list[torch.fx.Node]] = {}
        for node, unit in self.unit_of.items():
            self.units.setdefault(unit, []).append(node)
        self.order = list(self.units)
        self._rank = {unit: index for index, unit in enumerate(self.order)}
        self.outputs = {
            node for node in nodes if node.op == "output" for node in node.all_input_nodes
        }
        self.producers = self._producers_of_each()
        self.consumers = _consumers_of_each(self.producers)
        self.values = (
            self._eager_values(inputs)
            if inputs is not None
            else {node: node.meta.get("val") for node in nodes}
        )

    def _producers_of_each(self) -> dict[str, set[str]]:
        """The units each unit reads a value of."""
        return {
            unit: {
                self.unit_of[arg]
                for node in members
                for arg in node.all_input_nodes
                if arg in self.unit_of and self.unit_of[arg] != unit
            }
            for unit, members in self.units.items()
        }

    def _eager_values(self, inputs: Sequence[Any]) -> dict[torch.fx.Node, Any]:
        interpreter = _RecordingInterpreter(self.gm)
        # Copied only where the run may write into them: the values of views (a weight's
        # transpose) would otherwise keep a copy of every input (a model's weights) alive.
        with torch.no_grad():
            interpreter.run(*(clone_values(inputs) if may_write_inputs(self.gm) else inputs))
        values = interpreter.values
        placeholders = [node for node in self.gm.graph.nodes if node.op == "placeholder"]
        # The inputs as given, not as the run may have left them (graphs can mutate inputs).
        values.update(zip(placeholders, inputs, strict=True))
        return values

    def ordered(self, selection: Selection) -> list[str]:
        return sorted(selection, key=self._rank.__getitem__)

    def op_count(self, selection: Selection) -> int:
        return sum(len(self.units[unit]) for unit in selection)

    def observed_nodes(self) -> list[torch.fx.Node]:
        """The floating values a probe of every intermediate judges: all but the views that only
        rearrange all of another value's elements (judged, they would repeat their base's verdict;
        returned, each costs the compile an output), which are observed only as outputs of the
        graph."""
        return [
            node
            for node in self.unit_of
            if _is_floating(self.values.get(node)) and self._returned_if_observed(node)
        ]

    def _returned_if_observed(self, node: torch.fx.Node) -> bool:
        """Whether a probe returns ``node`` when it observes its kind of value: not a view that
        only rearranges another value's elements, unless the graph returns it."""
        return node in self.outputs or node not in self._view_bases

    def located_nodes(self) -> list[torch.fx.Node]:
        """The values the minifier's locate run judges: the :meth:`observed_nodes`, and the
        integer and bool values computed from exact values only, in graph order. Those are
        compared exactly; one computed from floating values is left out, since rounding within
        the rule upstream can flip it."""
        exact = self._exact_from_exact
        return [
            node
            for node in self.unit_of
            if (_is_floating(self.values.get(node)) or node in exact)
            and self._returned_if_observed(node)
        ]

    @functools.cached_property
    def _exact_from_exact(self) -> set[torch.fx.Node]:
        """The non-empty integer and bool values whose every input is one too (or no tensor)."""
        exact: set[torch.fx.Node] = set()
        for node in self.gm.graph.nodes:
            value = self.values.get(node)
            if (
                isinstance(value, torch.Tensor)
                and not value.is_floating_point()
                and not value.is_complex()
                and value.numel() > 0
                and all(
                    arg in exact or _holds_no_tensor(self.values.get(arg))
                    for arg in node.all_input_nodes
                )
            ):
                exact.add(node)
        return exact

    def hidden_nodes(self) -> list[torch.fx.Node]:
        """The observed values a later op can hide: those whose every path to the graph's outputs
        crosses an op that can mask a deviation (:meth:`exposed`: the others' deviations reach the
        outputs, which are judged). None in a graph where no op can mask."""
        exposed = self.exposed
        return [node for node in self.observed_nodes() if node not in exposed]

    @functools.cached_property
    def exposed(self) -> set[torch.fx.Node]:
        """The values with a path to the graph's outputs (or to an input it writes into) through
        ops that cannot mask a deviation of what they read (:func:`can_mask_a_deviation`)."""
        exposed = set(self.outputs)
        for node in reversed(list(self.unit_of)):
            if node not in exposed and (
                node in self._writers
                or any(user in exposed and not self._can_mask(user) for user in node.users)
            ):
                exposed.add(node)
        return exposed

    @functools.cached_property
    def _writers(self) -> set[torch.fx.Node]:
        """The nodes that may write into an argument: what they write is a result, never masked."""
        return {node for node in self.unit_of if writes_an_argument(node)}

    def _can_mask(self, node: torch.fx.Node) -> bool:
        """Whether ``node`` can hide a deviation of what it reads: as an op of its own, or as part
        of one that Inductor's decompositions broke up (``x - amax(x)`` of a softmax hides a shift
        of ``x``, which neither a ``sub`` nor an ``amax`` does alone)."""
        if node.target is operator.getitem or node in self._writers:
            return False
        inputs, result = (
            [self.values.get(arg) for arg in node.all_input_nodes],
            self.values.get(node),
        )
        try:
            return any(
                can_mask_a_deviation(target, inputs, result)
                for target in (node.target, decomposed_from(node))
                if target is not None
            )
        except Exception:
            return True  # unknown values (symbolic sizes): it may

    def probe(
        self,
        observed: list[torch.fx.Node] | None = None,
    ) -> tuple[torch.fx.GraphModule, list[Any], list[torch.fx.Node]]:
        """The graph up to ``observed`` (default: :meth:`observed_nodes`), returning them, its
        inputs, and those values in the order it returns them."""
        observed = self.observed_nodes() if observed is None else observed
        gm, inputs = self.slice(
            self._upstream({self.unit_of[node] for node in observed}),
            outputs=observed,
            every_input=True,
        )
        return gm, inputs, observed

    def _upstream(self, units: set[str]) -> Selection:
        """``units`` and every unit they read from: the ops after them need not compile."""
        reached, pending = set(units), list(units)
        while pending:
            for producer in self.producers[pending.pop()] - reached:
                reached.add(producer)
                pending.append(producer)
        return frozenset(reached)

    def with_views(self, diverged: set[torch.fx.Node]) -> set[torch.fx.Node]:
        """``diverged`` and the unobserved views of its values, which deviate with their base."""
        spread = set(diverged)
        for view, base in self._view_bases.items():
            if base in spread:
                spread.add(view)
        return spread

    @functools.cached_property
    def _view_bases(self) -> dict[torch.fx.Node, torch.fx.Node]:
        """Each view that rearranges all of another value's elements in the same dtype (a permute,
        a reshape, a squeeze), in graph order, with that value."""
        bases: dict[torch.fx.Node, torch.fx.Node] = {}
        for node in self.unit_of:
            base = node.args[0] if node.args else None
            if isinstance(base, torch.fx.Node) and self._rearranges_all_of(node, base):
                bases[node] = base
        return bases

    def _rearranges_all_of(self, node: torch.fx.Node, base: torch.fx.Node) -> bool:
        """Whether ``node`` is a view of ``base`` holding all of its elements in its dtype."""
        if not is_view_op(node.target) or node.target is torch.ops.aten.as_strided.default:
            return False
        value, base_value = self.values.get(node), self.values.get(base)
        return (
            isinstance(value, torch.Tensor)
            and isinstance(base_value, torch.Tensor)
            and value.dtype == base_value.dtype
            and value.numel() == base_value.numel()
        )

    def neighbourhood(self, centre: str, radius: int, within: Selection) -> Selection:
        """Units at most ``radius`` producer/consumer steps from ``centre``, inside ``within``."""
        reached = {centre}
        frontier = {centre}
        for _ in range(radius):
            frontier = {
                near
                for unit in frontier
                for near in self.producers[unit] | self.consumers[unit]
                if near in within
            } - reached
            reached |= frontier
        return frozenset(reached)

    def carried(self, diverged: set[torch.fx.Node]) -> set[torch.fx.Node]:
        """``diverged`` and the values computed from it that are not judged, since they are not
        floating (an index, a mask): they carry its deviation on (one ulp of an angle moves the
        index rounded from it), so what reads them deviates because of it."""
        carried = set(diverged)
        for node in self.unit_of:
            value = self.values.get(node)
            if (
                node not in carried
                and isinstance(value, torch.Tensor)
                and not value.is_floating_point()
                and not value.is_complex()
                and any(arg in carried for arg in node.all_input_nodes)
            ):
                carried.add(node)
        return carried

    def deviation_roots(
        self, diverged: set[torch.fx.Node], failing_outputs: set[torch.fx.Node]
    ) -> list[str]:
        """Units where a deviation starts, earliest first.

        Walks back from the failing outputs (every diverging value when none is an output) along
        diverging values only: a deviation that reaches the outputs only through a bool mask is
        not followed. The units reached that no diverging unit feeds are where deviations start.
        Views left unobserved (:meth:`observed_nodes`) deviate with their base.
        """
        diverged = self.with_views(diverged)
        bad = {self.unit_of[node] for node in diverged}
        pending = [self.unit_of[node] for node in (failing_outputs or diverged)]
        reached: set[str] = set()
        while pending:
            unit = pending.pop()
            if unit not in reached:
                reached.add(unit)
                pending.extend(self.producers[unit] & bad)
        return [unit for unit in self.order if unit in reached and not self.producers[unit] & bad]

    def slice(
        self,
        selection: Selection,
        outputs: Sequence[torch.fx.Node] | None = None,
        every_input: bool = False,
    ) -> tuple[torch.fx.GraphModule, list[Any]]:
        """The candidate keeping ``selection``: values from outside become inputs holding their
        real values, constants stay constants, and it returns what ``selection`` computes that
        nothing in it consumes, plus original outputs (or exactly ``outputs``). ``every_input``:
        it takes the graph's inputs too, those it does not read included (a probe is called as
        the graph is)."""
        kept = sorted(
            (node for unit in selection for node in self.units[unit]),
            key=self._position.__getitem__,
        )
        graph = torch.fx.Graph()
        env, inputs = self._boundary(graph, kept, every_input)
        for node in kept:
            env[node] = graph.node_copy(node, env.__getitem__)
            # Metadata of the original trace (fake tensors) would not match the new inputs.
            env[node].meta = {}
        if outputs is None:
            outputs = self._unconsumed(kept)
        graph.output(tuple(env[node] for node in outputs))
        return with_visible_outputs(
            torch.fx.GraphModule(self.gm, graph), self._visible(outputs)
        ), inputs

    def _boundary(
        self, graph: torch.fx.Graph, kept: list[torch.fx.Node], every_input: bool
    ) -> tuple[dict[torch.fx.Node, Any], list[Any]]:
        """The values ``kept`` nodes read from outside them, made in ``graph`` (:meth:`slice`): a
        tensor an input (its real value the candidate's input), a constant a constant, anything
        else its value; with ``every_input``, each of the graph's inputs too."""
        boundary = self._read_from_outside(kept, every_input)
        env: dict[torch.fx.Node, Any] = {}
        inputs: list[Any] = []
        for node in boundary:
            value = self.values[node]
            if node.op == "get_attr":
                continue
            if isinstance(value, torch.Tensor):
                env[node] = graph.placeholder(node.name)
                # A copy, so that the candidate carries neither the aliasing nor the storage
                # of a view it was cut from.
                inputs.append(value if node.op == "placeholder" else strided_copy(value))
            else:
                env[node] = value
        # After every placeholder: fx keeps a graph's inputs first.
        for node in boundary:
            if node.op == "get_attr":
                env[node] = graph.get_attr(str(node.target))
        return env, inputs

    def _unconsumed(self, kept: list[torch.fx.Node]) -> list[torch.fx.Node]:
        """The tensors ``kept`` nodes compute that none of them reads, or that the graph returns."""
        kept_set = set(kept)
        return [
            node
            for node in kept
            if isinstance(self.values.get(node), torch.Tensor)
            and (node in self.outputs or not any(user in kept_set for user in node.users))
        ]

    def _read_from_outside(
        self, kept: list[torch.fx.Node], every_input: bool
    ) -> list[torch.fx.Node]:
        """What ``kept`` nodes read that none of them computes (and, with ``every_input``, every
        input of the graph), in graph order."""
        kept_set = set(kept)
        outside = {arg for node in kept for arg in node.all_input_nodes if arg not in kept_set}
        if every_input:
            outside |= set(self.gm.graph.find_nodes(op="placeholder"))
        return sorted(outside, key=self._position.__getitem__)

    def _visible(self, outputs: Sequence[torch.fx.Node]) -> list[int] | None:
        """Which of a candidate's ``outputs`` Inductor is to take for the user's: those the graph
        marked so, and those it did not return at all (an output of a smaller graph is the
        user's); None where the graph marks none."""
        marked = visible_outputs(self.gm)
        if marked is None:
            return None
        returned = self.gm.graph.find_nodes(op="output")[0].args[0]
        returned = list(returned) if isinstance(returned, (tuple, list)) else [returned]
        shown = {node for index, node in enumerate(returned) if index in marked}
        return [
            index for index, node in enumerate(outputs) if node in shown or node not in returned
        ]


def side_by_side(
    root: torch.nn.Module,
    cuts: Sequence[tuple[torch.fx.GraphModule, list[Any]]],
) -> tuple[torch.fx.GraphModule, list[Any], list[range]]:
    """Cuts of one graph (:meth:`GraphSlicer.slice`; ``root``: that graph, which holds their
    constants) as one graph that computes each on its own inputs: its inputs, and the positions
    of each cut's outputs among its outputs. One compile judges them all."""
    graph = torch.fx.Graph()
    inputs: list[Any] = []
    outputs: list[Any] = []
    spans: list[range] = []
    for index, (cut, cut_inputs) in enumerate(cuts):
        env: dict[torch.fx.Node, Any] = {}
        for node in cut.graph.nodes:
            if node.op == "placeholder":
                env[node] = graph.placeholder(f"cut{index}_{node.name}")
            elif node.op == "output":
                returned = list(node.args[0])
                spans.append(range(len(outputs), len(outputs) + len(returned)))
                outputs.extend(env[value] for value in returned)
            else:
                env[node] = graph.node_copy(node, env.__getitem__)
        inputs.extend(cut_inputs)
    graph.output(tuple(outputs))
    return torch.fx.GraphModule(root, graph), inputs, spans


def _is_floating(value: Any) -> bool:
    return isinstance(value, torch.Tensor) and value.is_floating_point() and value.numel() > 0


def _holds_no_tensor(value: Any) -> bool:
    """A value an op reads that cannot carry a floating deviation: a Python or symbolic scalar,
    None (not a tensor, nor a tuple an op returned, whose parts may be floating)."""
    return not isinstance(value, torch.Tensor | tuple | list)


def output_index(path: str) -> int | None:
    """The output position in a leaf path of ``judge_graph`` (``graph_out[3]``); None for the other
    results it judges, the inputs the graph writes into (``judge.mutated_input_path``)."""
    match = re.fullmatch(r"graph_out\[(\d+)\]", path)
    return int(match.group(1)) if match is not None else None
