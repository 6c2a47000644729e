"""Inductor's config: patches, its source as a repro states it, what differs from the defaults."""

from __future__ import annotations

import ast
import contextlib
import contextvars
import types
import typing
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

import torch
import torch.fx

from pytest_torchcompile.torch_internals.compiling import import_compiler
from pytest_torchcompile.torch_internals.random_ops import draws_random_numbers

T = TypeVar("T")


def _config_module() -> Any:
    """Inductor's config module, the compiler imported for it as by :func:`import_compiler`."""
    import_compiler()
    # Here, not with this module: the plugin imports the compiler only when a compile needs it,
    # as a test's own compile would, so that its import changes nothing a test sees.
    import torch._inductor.config as config_module

    return config_module


@contextlib.contextmanager
def inductor_config(patches: dict[str, Any] | None) -> Iterator[None]:
    """Apply Inductor config values (dotted names such as ``cpp.inject_relu_bug_TESTING_ONLY``);
    the compiler is imported for them as by :func:`import_compiler`."""
    if not patches:
        yield
        return
    inductor_config_module = _config_module()

    with inductor_config_module.patch(patches):
        yield


def with_inductor_config_undone(run: Callable[[], T]) -> T:
    """``run()``, with every Inductor config assignment it makes undone afterwards (a repro file
    sets its config at import time).

    Nothing is written back: the config's overrides live in context variables (torch 2.13 on),
    and ``run`` sets them in a copy of the current context, which is dropped. Writing every
    value back instead (``load_config(get_config_copy())``) would turn each key into an override:
    every key read as the user's own from then on, torch 2.15's implication sources among them,
    and its deprecated keys warning in the user's process. A torch that keeps the overrides as
    plain values (2.11) has the changed ones set back as they were, below its setattr."""
    inductor_config_module = _config_module()

    entries = _entries()
    if entries is None or any(
        isinstance(entry.user_override, contextvars.ContextVar) for entry in entries.values()
    ):
        return contextvars.copy_context().run(run)
    saved = {name: entry.user_override for name, entry in entries.items()}
    try:
        return run()
    finally:
        for name, entry in entries.items():
            if entry.user_override is not saved[name]:
                entry.user_override = saved[name]
        # 2.11's config caches its hash; without this it would keep the repro's.
        if hasattr(inductor_config_module, "_is_dirty"):
            inductor_config_module._is_dirty = True


CACHE_SWITCHES = frozenset(
    {
        "fx_graph_cache",
        "fx_graph_remote_cache",
        "bundle_triton_into_fx_graph_cache",
        "autotune_local_cache",
        "autotune_remote_cache",
        "bundled_autotune_remote_cache",
        "remote_gemm_autotune_cache",
    }
)
"""Inductor config values that switch a cache on or off (and change nothing that is compiled)."""


def inductor_config_source(cpu_threads: bool = False) -> str:
    """Python statements that set every Inductor config value differing from its default; with
    ``cpu_threads``, also the thread count C++ kernels are generated for (``cpp.threads``) where
    it is left to follow ``torch.get_num_threads()``: generated C++ is shaped by it, and a process
    that compiles the graph again (a repro, a judging child) may run with another.

    A value set to what it is by default is left out: Inductor's own code sets some so (a first
    compile in a process does), and a repro's reader would take each line for a difference. So
    are the switches of caches, which change what is looked up, not what is compiled (the
    checks turn some off while they capture graphs)."""
    inductor_config_module = _config_module()

    values = inductor_config_module.get_config_copy()
    # A torch without the default records (``defaults_missing``) keeps every line.
    entries: dict[str, Any] = getattr(inductor_config_module, "_config", {})
    prefix = "torch._inductor.config."
    lines = []
    for line in _assignments(str(inductor_config_module.codegen_config())):
        name = line.split("=", 1)[0].strip().removeprefix(prefix)
        default = getattr(entries.get(name), "default", _NO_DEFAULT)
        if line.startswith(prefix) and (
            _equal(values.get(name), default) or name in CACHE_SWITCHES
        ):
            continue
        lines.append(line)
    if cpu_threads and inductor_config_module.cpp.threads < 1:
        lines.append(f"torch._inductor.config.cpp.threads = {torch.get_num_threads()}")
    return "\n".join(line for line in lines if line.strip())


_NO_DEFAULT = object()

_BATCH_LOAD = "torch._inductor.config.load_config("


def _assignments(codegen: str) -> list[str]:
    """``codegen_config()``'s lines, with torch 2.15's batch of implication-aware values
    (``torch._inductor.config.load_config({...})``) written as one assignment each: the form
    every supported torch reads, and that repros, judging processes and the filter above parse
    line by line. (Its values are plain literals: an implication takes no other type.)"""
    lines = []
    for line in codegen.splitlines():
        if not (line.startswith(_BATCH_LOAD) and line.endswith(")")):
            lines.append(line)
            continue
        batch = ast.literal_eval(line[len(_BATCH_LOAD) : -1])
        lines.extend(f"torch._inductor.config.{name} = {value!r}" for name, value in batch.items())
    return lines


def _equal(value: Any, default: Any) -> bool:
    try:
        return type(value) is type(default) and bool(value == default)
    except Exception:
        return False


def inductor_config_diff() -> dict[str, Any]:
    """Inductor config values that differ from their defaults, JSON-friendly (repr for others);
    none where this torch cannot tell (:func:`default_test_missing`). A value set back to its
    default counts as the default: a config patch put back, or a config copy loaded (as the
    checks do), leaves the value marked as set."""
    inductor_config_module = _config_module()

    if default_test_missing() is not None:
        return {}
    # Private on the config module and absent from its type stubs.
    is_default: Callable[[str], bool] = getattr(inductor_config_module, "_is_default")  # noqa: B009
    entries = _entries() if defaults_missing() is None else None
    diff: dict[str, Any] = {}
    for name, value in inductor_config_module.get_config_copy().items():
        if is_default(name) or (
            entries is not None and name in entries and _equal(value, entries[name].default)
        ):
            continue
        diff[name] = (
            value if isinstance(value, (bool, int, float, str, type(None))) else repr(value)
        )
    return diff


def default_test_missing() -> str | None:
    """The internal :func:`inductor_config_diff` needs that this torch lacks; None where it has it."""
    inductor_config_module = _config_module()

    return (
        None
        if callable(getattr(inductor_config_module, "_is_default", None))
        else "torch._inductor.config._is_default"
    )


def _entries() -> dict[str, Any] | None:
    """The Inductor config's entries by name (private: each holds a default and the user's
    override); None where this torch keeps them otherwise."""
    inductor_config_module = _config_module()

    entries = getattr(inductor_config_module, "_config", None)
    return entries if isinstance(entries, dict) and entries else None


def _entry_field_missing(field: str) -> str | None:
    entries = _entries()
    if entries is None:
        return "torch._inductor.config._config"
    return (
        None
        if hasattr(next(iter(entries.values())), field)
        else f"torch._inductor.config._config[name].{field}"
    )


def defaults_missing() -> str | None:
    """The internal :func:`inductor_config_default` reads that this torch lacks; None where it has it."""
    return _entry_field_missing("default")


def overrides_missing() -> str | None:
    """The internal :func:`config_values` reads that this torch lacks; None where it has it."""
    return _entry_field_missing("user_override")


def inductor_config_has(name: str) -> bool:
    """Whether this torch's Inductor config has a value of that (dotted) name."""
    inductor_config_module = _config_module()

    entries = _entries()
    return name in (entries if entries is not None else inductor_config_module.get_config_copy())


def types_missing() -> str | None:
    """The internal :func:`inductor_config_refusal` reads that this torch lacks; None where it has
    it."""
    return _entry_field_missing("value_type")


_SCALARS: dict[Any, str] = {
    bool: "a bool",
    int: "an int",
    float: "a float",
    str: "a str",
    type(None): "None",
}


def inductor_config_refusal(name: str, value: Any) -> str | None:
    """What the Inductor config value ``name`` (dotted) takes where ``value`` is not of it, by the
    type this torch declares for it (its annotation, else its default's type): a bool, an int, a
    float, a str, None, a ``Literal``'s values, or a union of these. None where ``value`` is of
    it, and where the type has another form (a list, a dict, a callable, a class of torch's, a
    default of None with no annotation) or this torch keeps none (:func:`types_missing`): such a
    value is left to the compile."""
    entries = _entries() if types_missing() is None else None
    declared = getattr((entries or {}).get(name), "value_type", None)
    # A default of None with no annotation declares no type: any value is the user's guess.
    taken = None if declared is type(None) else _alternatives(declared)
    if not taken or any(_takes(alternative, value) for alternative in taken):
        return None
    return f"{_described(taken)}, as this torch's Inductor config declares it"


@dataclass(frozen=True)
class _Literal:
    value: Any


def _alternatives(declared: Any) -> list[Any] | None:
    """The scalar types and literal values (:class:`_Literal`) a declared type takes; None where
    it has another form."""
    if isinstance(declared, type) and declared in _SCALARS:
        return [declared]
    origin = typing.get_origin(declared)
    if origin is typing.Literal:
        return [_Literal(value) for value in typing.get_args(declared)]
    if origin not in (typing.Union, types.UnionType):
        return None
    alternatives: list[Any] = []
    for argument in typing.get_args(declared):
        part = _alternatives(argument)
        if part is None:
            return None
        alternatives += part
    return alternatives


def _takes(alternative: Any, value: Any) -> bool:
    # A bool is an int to Python, not to a config that declares one of them; an int is a float.
    if isinstance(alternative, _Literal):
        return type(value) is type(alternative.value) and bool(value == alternative.value)
    if alternative is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if alternative is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, alternative)


def _described(taken: list[Any]) -> str:
    """What ``taken`` (:func:`_alternatives`) holds, in words: its types, its literal values as
    one choice, None last."""
    scalars = [_SCALARS[a] for a in taken if a in (bool, int, float, str)]
    values = [repr(a.value) for a in taken if isinstance(a, _Literal)]
    choice = [f"one of {', '.join(values)}"] if values else []
    return " or ".join([*scalars, *choice, *(["None"] if type(None) in taken else [])])


def inductor_config_default(name: str) -> Any:
    """The default of an Inductor config value (dotted name); only where :func:`defaults_missing`
    is None."""
    entries = _entries()
    assert entries is not None
    return entries[name].default


def config_values(patches: dict[str, Any] | None) -> dict[str, Any]:
    """What the Inductor config holds now for the names ``patches`` sets: the values set, or the
    config module's marker of a name left unset, which patched back leaves it unset again (so
    that the config reads as the user's, down to the statements a repro's header sets). Nothing
    where this torch keeps no readable override (:func:`overrides_missing`): the patches stay."""
    if not patches:
        return {}
    import_compiler()
    entries = _entries()
    if entries is None or overrides_missing() is not None:
        return {}
    # 2.13 keeps the override in a holder read with get(); 2.11 keeps the value (or the marker) itself.
    overrides = {name: entries[name].user_override for name in patches}
    return {
        name: override.get() if hasattr(override, "get") else override
        for name, override in overrides.items()
    }


def where_random(
    lowered: torch.fx.GraphModule, random_config: dict[str, Any] | None, outside: dict[str, Any]
) -> dict[str, Any] | None:
    """``random_config`` for a lowered graph that draws random numbers; for any other, ``outside``:
    the values the names of :func:`tracing_part` had outside the compile (the user's own). The
    torch-level graph compiles under that part, so that AOT autograd keeps random ops for Inductor
    to fall back on, which changes nothing for graphs that draw none, and each lowered graph is
    compiled as the user's compile would, but for its random ops. (Only those names are set back:
    the compile's own ``options`` are in force by then, and the rest of ``random_config`` was never
    set at the torch level.)"""
    if any(
        node.op == "call_function" and draws_random_numbers(node.target, node.args, node.kwargs)
        for node in lowered.graph.nodes
    ):
        return random_config
    return outside


TRACED_RANDOM_CONFIG = frozenset({"fallback_random"})
"""The Inductor config names AOT autograd reads as it traces a torch-level graph into lowered
ones (Inductor's decompositions keep random ops under ``fallback_random``). Any other name of a
random config (the layout, say) would change the lowered graphs that draw nothing too, where
it is read at the torch level: freezing decides the layout there, so a frozen graph that draws
random numbers keeps the user's layout."""


def tracing_part(random_config: dict[str, Any] | None) -> dict[str, Any] | None:
    """The entries of ``random_config`` a torch-level graph compiles under (:data:`TRACED_RANDOM_CONFIG`)."""
    if random_config is None:
        return None
    return {name: value for name, value in random_config.items() if name in TRACED_RANDOM_CONFIG}
