"""The compiled runs of a check: the compiled copy of a model (kept across a test's checks
in a :class:`CompiledCache`), its run on each input set, and its run again on one."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from pytest_torchcompile.checking.masked import ConcurrentProbes, ProbeChildren
from pytest_torchcompile.checking.outcome import CheckOutcome, compiler_error_outcome
from pytest_torchcompile.checking.runs import copy_callable, execute
from pytest_torchcompile.common.settings import CheckOptions
from pytest_torchcompile.common.verdict import Comparison
from pytest_torchcompile.judging.capture import GraphCapture
from pytest_torchcompile.judging.reordering import Arguments
from pytest_torchcompile.torch_internals.compiling import no_compile_caches, reset, strict_dynamo
from pytest_torchcompile.torch_internals.config import inductor_config
from pytest_torchcompile.torch_internals.rng import EAGER_RNG_CONFIG


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
    copy_ = copy_callable(fn)
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


SetRuns = tuple[Arguments, tuple[dict[str, Any], list[Any]], tuple[dict[str, Any], list[Any]]]
"""An input set's arguments, eager's run on it and the compiled run."""


@dataclass
class CompiledRuns:
    entry: CompiledEntry
    results: list[SetRuns]
    """Per input set: its arguments, eager's run and the compiled run."""
    seconds: float


def compiled_runs(
    fn: Callable[..., Any],
    sets: list[Arguments],
    eager_runs: list[tuple[dict[str, Any], list[Any]]],
    options: CheckOptions,
    cache: CompiledCache | None,
    probe_children: ProbeChildren | None,
) -> CompiledRuns | CheckOutcome:
    """The compiled model's run on each input set beside eager's, compiled anew or taken from
    ``cache``; the outcome instead where compiling or running it raised. A cached copy that
    Dynamo no longer compiles (its recompile limit) is dropped and compiled afresh, once."""
    keeping = cache if not options.training else None
    entry = keeping.lookup(fn) if keeping is not None else None
    started = time.perf_counter()
    try:
        with inductor_config(options.inductor_config), no_compile_caches(), strict_dynamo():
            entry, results = _cached_runs(entry, keeping, sets, eager_runs, options)
            if entry is None:
                entry = _compile(fn, options, probe_children)
                results = _run_sets(entry, sets, eager_runs, options)
    except Exception as error:
        if keeping is not None:
            keeping.forget(entry)
        graphs = entry.capture.graphs if entry is not None else []
        return compiler_error_outcome(error, graphs, time.perf_counter() - started)
    assert entry is not None and results is not None
    if keeping is not None:
        keeping.keep(entry)
    else:
        reset()
    return CompiledRuns(entry, results, time.perf_counter() - started)


def _cached_runs(
    entry: CompiledEntry | None,
    keeping: CompiledCache | None,
    sets: list[Arguments],
    eager_runs: list[tuple[dict[str, Any], list[Any]]],
    options: CheckOptions,
) -> tuple[CompiledEntry | None, list[SetRuns] | None]:
    """The cached copy ``entry`` and its run on each input set; none where there is no cached
    copy, or where it ran eagerly (past Dynamo's recompile limit: nothing was judged), which is
    then dropped from ``keeping``."""
    if entry is None:
        return None, None
    results = _run_sets(entry, sets, eager_runs, options)
    if any(graph.calls for graph in entry.capture.graphs):
        return entry, results
    assert keeping is not None
    keeping.forget(entry)
    return None, None


def _run_sets(
    entry: CompiledEntry,
    sets: list[Arguments],
    eager_runs: list[tuple[dict[str, Any], list[Any]]],
    options: CheckOptions,
) -> list[SetRuns]:
    entry.capture.forget_calls()
    results = []
    for arguments, eager_run in zip(sets, eager_runs, strict=True):
        torch.manual_seed(options.seed)
        results.append(
            (arguments, eager_run, execute(entry.compiled, entry.module, arguments, options))
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
        return execute(entry.compiled, entry.module, arguments, options)


def recurs(
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


def _state(module: Any) -> list[tuple[str, torch.Tensor]]:
    """A module's parameters and buffers, by name (none for a plain function)."""
    if not isinstance(module, torch.nn.Module):
        return []
    return [*module.named_parameters(), *module.named_buffers()]
