"""What a suite can read of torch's compile machinery after its compiles (Dynamo's counters, its
compile ids, metrics, graph-break and recompile records, Inductor's kernel metrics), kept as the
suite's own compiles leave it while the plugin compiles beside them."""

from __future__ import annotations

import collections
import contextlib
import itertools
import re
import sys
from collections.abc import Iterator
from typing import Any

_RECORDS: dict[str, tuple[str, ...]] = {
    "torch._dynamo.utils": (
        "counters",
        "compilation_time_metrics",
        "cumulative_time_spent_ns",
        "_compilation_metrics",
        "graph_break_reasons",
        "guard_failures",
        "op_count",
    ),
    "torch._dynamo.convert_frame": ("FRAME_COUNTER", "FRAME_COMPILE_COUNTER"),
    "torch._dynamo.output_graph": ("_compile_id_counter",),
    "torch._functorch.aot_autograd": ("AOT_COUNTER",),
    "torch._inductor.compile_fx": ("_graph_counter",),
    "torch._inductor.graph": ("_post_grad_graph_counter",),
    "torch._inductor.scheduler": ("_post_grad_graph_counter",),
}
"""Per module, the module-level records a compile adds to: tests assert on the counters
(``counters["inductor"]["pattern_matcher_count"]``), on compile ids and metrics, on graph
breaks. Inductor's ``metrics`` module is read whole (:data:`_METRICS`). A record a torch lacks is
left out."""

_METRICS = "torch._inductor.metrics"
"""Inductor's kernel metrics (``generated_kernel_count`` ...): every lowercase module-level number
and container, as its ``reset()`` sets them."""


@contextlib.contextmanager
def unobserved() -> Iterator[None]:
    """Whatever the block compiles leaves no trace in those records: each is as the block found
    it when it ends (containers restored in place, as a suite holding one sees it). Only modules
    imported already are read: one the block imports starts from its own state, as it would have
    at the suite's first compile. A torch without a record has nothing to restore there."""
    saved = [(module, name, _saved(getattr(module, name))) for module, name in _present()]
    try:
        yield
    finally:
        for module, name, value in saved:
            _restore(module, name, value)


def _present() -> list[tuple[Any, str]]:
    present = [
        (sys.modules[module], name)
        for module, names in _RECORDS.items()
        if module in sys.modules
        for name in names
        if hasattr(sys.modules[module], name)
    ]
    return present + _present_metrics()


def _present_metrics() -> list[tuple[Any, str]]:
    """The records of Inductor's metrics module, where it is imported: its public counters and
    tables."""
    metrics = sys.modules.get(_METRICS)
    if metrics is None:
        return []
    return [
        (metrics, name)
        for name, value in vars(metrics).items()
        if name.islower()
        and not name.startswith("_")
        and isinstance(value, int | float | list | dict | set)
    ]


class _Count:
    """An ``itertools.count``'s next value (a count has no other reading but its repr)."""

    def __init__(self, count: itertools.count[int]) -> None:
        match = re.fullmatch(r"count\((-?\d+)\)", repr(count))
        self.start = int(match.group(1)) if match else None


def _saved(value: Any) -> Any:
    """A copy of a record that the block's compiles cannot change, one level deep (the counters
    are a dict of Counters, the metrics dicts of lists)."""
    if isinstance(value, itertools.count):
        return _Count(value)
    if isinstance(value, dict):
        return {key: _copy(inner) for key, inner in value.items()}
    if isinstance(value, list | set | collections.deque):
        return [_copy(inner) for inner in value]
    return value


def _copy(value: Any) -> Any:
    return value.copy() if isinstance(value, dict | list | set) else value


def _restore(module: Any, name: str, saved: Any) -> None:
    current = getattr(module, name)
    if isinstance(saved, _Count):
        if saved.start is not None:
            setattr(module, name, itertools.count(saved.start))
    elif isinstance(current, dict):
        _restore_table(current, saved)
    elif isinstance(current, list | set | collections.deque):
        _refill(current, saved)
    else:
        setattr(module, name, saved)


def _restore_table(current: dict[Any, Any], saved: dict[Any, Any]) -> None:
    """A dict record holding ``saved``'s keys and values again, each inner container the same
    object."""
    for key in [key for key in current if key not in saved]:
        del current[key]
    for key, value in saved.items():
        if isinstance(current.get(key), dict | list | set):
            _refill(current[key], value)
        else:
            current[key] = value


def _refill(container: Any, saved: Any) -> None:
    """``container`` holding ``saved``'s items again, the same object."""
    container.clear()
    if isinstance(container, dict | set):
        container.update(saved)
    else:
        container.extend(saved)
