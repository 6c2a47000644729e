"""Every use of torch internals (``torch._inductor``, ``torch._dynamo``, ``torch._functorch``).

These APIs move between releases; keeping them here means one file to fix and to test
against each supported torch (2.11 and 2.13 at least).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import importlib
import importlib.abc
import importlib.machinery
import logging
import math
import os
import pathlib
import platform
import re
import sys
import tempfile
import threading
import types
import warnings
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import torch
import torch.fx

from pytest_torchcompile.run.budget import CHILD_ENV

CompiledGraph = Callable[[list[Any]], Any]
"""A compiled FX graph in Inductor's boxed calling convention: takes a list, returns a sequence."""

InnerCompileHook = Callable[
    [torch.fx.GraphModule, Sequence[Any], dict[str, Any], Callable[[], CompiledGraph]], CompiledGraph
]
"""Called with (post-AOT graph, fake example inputs, Inductor kwargs, a function that compiles the
graph); returns the callable Inductor should use. The hook sees the graph before Inductor's passes
rewrite it and sees compile errors."""

DynamoCompileHook = Callable[[torch.fx.GraphModule, Sequence[Any], Callable[[], Any]], Any]
"""Called with (Dynamo's torch-level graph, its example inputs, a function that compiles it through
AOT autograd, decompositions and Inductor); returns the callable Dynamo should use."""


def compile_graph(gm: torch.fx.GraphModule, inputs: Sequence[Any]) -> Callable[..., Any]:
    """Compile a post-AOT (aten-level) FX graph with Inductor and return a plain callable.

    This function is also embedded verbatim in generated repro files, so it may only use torch.
    """
    from torch._inductor.compile_fx import compile_fx_inner

    compiled = compile_fx_inner(gm, list(inputs))

    def run(*args: Any) -> Any:
        return compiled(list(args))

    run.inductor_compiled = compiled  # type: ignore[attr-defined]
    return run


def compile_dynamo_graph(gm: torch.fx.GraphModule, inputs: Sequence[Any] = ()) -> Callable[..., Any]:
    """Compile a torch-level (Dynamo) FX graph through the whole stack, as ``torch.compile`` does:
    AOT autograd, Inductor's decompositions, Inductor. The Inductor config in force applies.

    Embedded verbatim in generated repro files, so it may only use torch. AOT autograd's cache
    is off: its key does not cover the decomposition table, so it could hand back code compiled
    before a fix.
    """
    import torch._dynamo
    import torch._functorch.config

    del inputs  # compiled at the first call, for the grad mode of that call
    torch._dynamo.reset()
    compiled = torch.compile(gm, backend="inductor", fullgraph=True, dynamic=False)

    def run(*args: Any) -> Any:
        with torch._functorch.config.patch(enable_autograd_cache=False):
            return compiled(*args)

    return run


def generated_source(compiled: Callable[..., Any]) -> str | None:
    """The kernel source Inductor generated (C++ or Triton wrapper module) for a compiled graph."""
    inner = getattr(compiled, "inductor_compiled", compiled)
    source = getattr(inner, "source_code", None)
    return source if isinstance(source, str) else None


def post_aot_graphs(gm: torch.fx.GraphModule, inputs: Sequence[Any]) -> list[tuple[str, str]]:
    """Compile a torch-level graph through the whole stack and return, for each graph Inductor
    lowered, its kind and code: what AOT autograd and the decompositions made of ``gm``."""
    graphs: list[tuple[str, str]] = []

    def hook(lowered: torch.fx.GraphModule, example_inputs: Sequence[Any], kwargs: dict[str, Any],
             compile_fn: Callable[[], CompiledGraph]) -> CompiledGraph:
        kind = "backward" if kwargs.get("is_backward") else "inference" if kwargs.get("is_inference") else "forward"
        graphs.append((kind, lowered.code.strip()))
        return compile_fn()

    reset()
    with no_compile_caches():
        compiled = torch.compile(gm, backend=capturing_backend(hook), fullgraph=True, dynamic=False)
        outputs = compiled(*inputs)
        if torch.is_grad_enabled():
            floating = [o for o in outputs if isinstance(o, torch.Tensor) and o.requires_grad]
            if floating:
                torch.autograd.backward([o.float().sum() for o in floating])
    return graphs


def _mode_patches(mode: str | None, options: dict[str, Any] | None) -> dict[str, Any]:
    from torch._inductor import list_mode_options

    patches: dict[str, Any] = {}
    if mode and mode != "default":
        patches.update(list_mode_options(mode))
    patches.update(options or {})
    return patches


def capturing_backend(
    hook: InnerCompileHook,
    mode: str | None = None,
    options: dict[str, Any] | None = None,
    dynamo_hook: DynamoCompileHook | None = None,
    random_config: dict[str, Any] | None = None,
) -> Callable[..., Any]:
    """A ``torch.compile`` backend equal to Inductor that shows each lowered graph to ``hook``,
    and each torch-level graph Dynamo hands it to ``dynamo_hook``; a lowered graph that draws
    random numbers compiles under the Inductor config patches ``random_config``
    (:func:`_where_random`)."""
    from torch._inductor.compile_fx import compile_fx, compile_fx_inner

    patches = _mode_patches(mode, options)

    def backend(gm: torch.fx.GraphModule, example_inputs: Sequence[Any]) -> Any:
        outside = _config_values(random_config)

        def inner_compile(lowered: torch.fx.GraphModule, inputs: Sequence[Any], **kwargs: Any) -> Any:
            with inductor_config(_where_random(lowered, random_config, outside)):
                return hook(lowered, inputs, kwargs, lambda: compile_fx_inner(lowered, inputs, **kwargs))

        def compile_all() -> Any:
            with inductor_config(random_config):
                return compile_fx(gm, example_inputs, inner_compile=inner_compile, config_patches=patches)

        return dynamo_hook(gm, example_inputs, compile_all) if dynamo_hook is not None else compile_all()

    return backend


def _config_values(patches: dict[str, Any] | None) -> dict[str, Any]:
    """What the Inductor config holds now for the names ``patches`` sets: the values set, or the
    config module's marker of a name left unset, which patched back leaves it unset again (so
    that the config reads as the user's, down to the statements a repro's header sets)."""
    if not patches:
        return {}
    import_compiler()
    import torch._inductor.config as inductor_config_module

    entries: dict[str, Any] = getattr(inductor_config_module, "_config")  # noqa: B009
    return {name: entries[name].user_override.get() for name in patches}


def _where_random(lowered: torch.fx.GraphModule, random_config: dict[str, Any] | None,
                  outside: dict[str, Any]) -> dict[str, Any] | None:
    """``random_config`` for a lowered graph that draws random numbers; for any other, the values
    those names had outside the compile (the user's own): the torch-level graph compiles under
    ``random_config`` so that AOT autograd keeps random ops for Inductor to fall back on, which
    changes nothing for graphs that draw none, and each lowered graph is compiled as the user's
    compile would, but for its random ops."""
    if any(node.op == "call_function" and is_random_op(node.target) for node in lowered.graph.nodes):
        return random_config
    return outside


@contextlib.contextmanager
def intercept_inductor(hook: InnerCompileHook, dynamo_hook: DynamoCompileHook | None = None,
                       random_config: dict[str, Any] | None = None) -> Iterator[None]:
    """Route every Inductor compilation started while active (plain ``torch.compile(model)``
    included) through ``hook``, and the torch-level graph it starts from through ``dynamo_hook``;
    each compiles without the caches that would skip ``hook``, a graph that draws random numbers
    under the Inductor config patches ``random_config`` (:func:`_where_random`). Those are applied per compilation, not for the block: a test that compiles nothing
    pays only the swap of one attribute, and where the compiler is not imported yet, not even its
    import (the swap is made as the block imports it, if it does).

    ``torch.compile``'s default backend and the registered "inductor" backend both look
    ``compile_fx`` up on its module at call time, so replacing that attribute catches them while
    leaving other backends untouched.
    """
    intercepted: list[tuple[types.ModuleType, Any]] = []

    def intercept(compile_fx_module: types.ModuleType) -> None:
        original = compile_fx_module.compile_fx

        def compile_fx(model: Any, example_inputs: Any, *args: Any, **kwargs: Any) -> Any:
            if kwargs.get("inner_compile", compile_fx_module.compile_fx_inner) is not compile_fx_module.compile_fx_inner:
                return original(model, example_inputs, *args, **kwargs)
            outside = _config_values(random_config)

            def inner_compile(gm: torch.fx.GraphModule, inputs: Sequence[Any], **inner_kwargs: Any) -> Any:
                # Patched here too: a backward graph is compiled at its first call, after compile_fx returned.
                with no_compile_caches(), inductor_config(_where_random(gm, random_config, outside)):
                    return hook(
                        gm, inputs, inner_kwargs,
                        lambda: compile_fx_module.compile_fx_inner(gm, inputs, **inner_kwargs),
                    )

            kwargs["inner_compile"] = inner_compile
            with no_compile_caches(), inductor_config(random_config):
                if dynamo_hook is None:
                    return original(model, example_inputs, *args, **kwargs)
                return dynamo_hook(model, example_inputs, lambda: original(model, example_inputs, *args, **kwargs))

        compile_fx_module.compile_fx = compile_fx  # type: ignore[attr-defined]
        _INTERCEPTED_ORIGINALS.append(original)
        intercepted.append((compile_fx_module, original))

    try:
        with _on_import(_COMPILE_FX_MODULE, intercept):
            yield
    finally:
        for compile_fx_module, original in reversed(intercepted):
            _INTERCEPTED_ORIGINALS.pop()
            compile_fx_module.compile_fx = original


_COMPILE_FX_MODULE = "torch._inductor.compile_fx"


@contextlib.contextmanager
def _on_import(name: str, callback: Callable[[types.ModuleType], None]) -> Iterator[None]:
    """Call ``callback`` with module ``name``: now if it is imported, else as soon as the block
    imports it (after its code ran, before the importer sees it), if it does."""
    module = sys.modules.get(name)
    if module is not None:
        callback(module)
        yield
        return
    finder = _ImportCallback(name, callback)
    sys.meta_path.insert(0, finder)
    try:
        yield
    finally:
        with contextlib.suppress(ValueError):
            sys.meta_path.remove(finder)


class _ImportCallback(importlib.abc.MetaPathFinder):
    """Finds module ``name`` with the finders after it and has its loader call ``callback``
    once the module's code ran."""

    def __init__(self, name: str, callback: Callable[[types.ModuleType], None]) -> None:
        self._name = name
        self._callback = callback

    def find_spec(self, fullname: str, path: Sequence[str] | None,
                  target: types.ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
        if fullname != self._name or self not in sys.meta_path:
            return None
        for finder in sys.meta_path[sys.meta_path.index(self) + 1:]:
            find_spec = getattr(finder, "find_spec", None)
            spec = find_spec(fullname, path, target) if find_spec is not None else None
            if spec is not None:
                break
        else:
            return None
        if spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        spec.loader = _CallbackLoader(spec.loader, self._callback)
        return spec


class _CallbackLoader(importlib.abc.Loader):
    def __init__(self, loader: Any, callback: Callable[[types.ModuleType], None]) -> None:
        self._loader = loader
        self._callback = callback

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType | None:
        module: types.ModuleType | None = self._loader.create_module(spec)
        return module

    def exec_module(self, module: types.ModuleType) -> None:
        self._loader.exec_module(module)
        # The module keeps its own loader (for its source, a reload) rather than this one.
        module.__loader__ = self._loader
        if module.__spec__ is not None:
            module.__spec__.loader = self._loader
        self._callback(module)


_INTERCEPTED_ORIGINALS: list[Any] = []


@contextlib.contextmanager
def not_intercepted() -> Iterator[None]:
    """Compile with Inductor as installed while the block runs, inside ``intercept_inductor``
    too: the plugin's own compiles (a check, judging a graph standalone) are not compiles of
    the test, and judging them again would report one bug twice."""
    # Imported first: an interception waiting for the compiler's import is made, and set aside here.
    import_compiler()
    if not _INTERCEPTED_ORIGINALS:
        yield
        return
    import torch._inductor.compile_fx as compile_fx_module

    intercepting = compile_fx_module.compile_fx
    compile_fx_module.compile_fx = _INTERCEPTED_ORIGINALS[0]
    try:
        yield
    finally:
        compile_fx_module.compile_fx = intercepting


@contextlib.contextmanager
def no_compile_caches() -> Iterator[None]:
    """Disable the caches that would skip Inductor's inner compile, and so skip capture."""
    import torch._functorch.config as functorch_config
    import torch._inductor.config as inductor_config

    patches: list[contextlib.AbstractContextManager[Any]] = [
        functorch_config.patch(enable_autograd_cache=False),
    ]
    if hasattr(inductor_config, "bundled_autotune_remote_cache"):
        patches.append(inductor_config.patch(bundled_autotune_remote_cache=False))
    with contextlib.ExitStack() as stack:
        for patch in patches:
            stack.enter_context(patch)
        yield


@contextlib.contextmanager
def inductor_config(patches: dict[str, Any] | None) -> Iterator[None]:
    """Apply Inductor config values (dotted names such as ``cpp.inject_relu_bug_TESTING_ONLY``);
    the compiler is imported for them as by :func:`import_compiler`."""
    if not patches:
        yield
        return
    import_compiler()
    import torch._inductor.config as inductor_config_module

    with inductor_config_module.patch(patches):
        yield


@contextlib.contextmanager
def inductor_config_restored() -> Iterator[None]:
    """Undo, on exit, whatever Inductor config assignments the block made (a repro file sets its
    config at import time)."""
    import torch._inductor.config as inductor_config_module

    saved = inductor_config_module.get_config_copy()
    try:
        yield
    finally:
        inductor_config_module.load_config(saved)


def inductor_config_source(cpu_threads: bool = False) -> str:
    """Python statements that set every Inductor config value differing from its default; with
    ``cpu_threads``, also the thread count C++ kernels are generated for (``cpp.threads``) where
    it is left to follow ``torch.get_num_threads()``: generated C++ is shaped by it, and a process
    that compiles the graph again (a repro, a judging child) may run with another."""
    import torch._inductor.config as inductor_config_module

    lines = str(inductor_config_module.codegen_config()).rstrip("\n")
    if cpu_threads and inductor_config_module.cpp.threads < 1:
        lines = "\n".join(filter(None, [lines, f"torch._inductor.config.cpp.threads = {torch.get_num_threads()}"]))
    return lines


def inductor_config_diff() -> dict[str, Any]:
    """Inductor config values that differ from their defaults, JSON-friendly (repr for others)."""
    import torch._inductor.config as inductor_config_module

    # Private on the config module and absent from its type stubs.
    is_default: Callable[[str], bool] = getattr(inductor_config_module, "_is_default")  # noqa: B009
    diff: dict[str, Any] = {}
    for name, value in inductor_config_module.get_config_copy().items():
        if is_default(name):
            continue
        diff[name] = value if isinstance(value, (bool, int, float, str, type(None))) else repr(value)
    return diff


def limit_this_process(threads: int) -> None:
    """At most ``threads`` threads for this process's eager and compiled CPU code, its Inductor
    compile workers, and the children it starts from now on."""
    torch.set_num_threads(threads)
    # Read by the children it starts, and by this process's Inductor config if it is imported later.
    os.environ.update({name: str(threads) for name in CHILD_ENV})
    set_compile_threads(threads)


def set_compile_threads(threads: int) -> None:
    """How many compile workers Inductor's pool gets (read when the pool starts, at the first
    compile that needs it), where Inductor's config is imported already. It is not imported for
    this (that imports Dynamo): imported later, it reads ``TORCHINDUCTOR_COMPILE_THREADS``."""
    inductor_config_module = sys.modules.get("torch._inductor.config")
    if inductor_config_module is not None:
        inductor_config_module.compile_threads = threads  # type: ignore[attr-defined]


def reset() -> None:
    """Forget compiled code so that the next ``torch.compile`` call lowers again."""
    import torch._dynamo

    torch._dynamo.reset()


def reset_if_compiled() -> None:
    """:func:`reset`, unless Dynamo has compiled no frame since the last reset (which zeroes its
    frame counter) or is not even imported."""
    convert_frame = sys.modules.get("torch._dynamo.convert_frame")
    if convert_frame is None:
        return
    frames_compiled: int = getattr(convert_frame, "FRAME_COUNTER", 1)
    if frames_compiled:
        reset()


def quiet_trace_log() -> None:
    """Keep torch's structured-trace logger out of captured logs. It logs at DEBUG with empty
    messages (its payload goes to TORCH_TRACE files), and pytest attaches its capture handlers to
    it, so every compile adds hundreds of empty lines to a failing test's report. Left alone when
    TORCH_TRACE asks for the trace."""
    if not os.environ.get("TORCH_TRACE"):
        # torch's trace logger decides by its own level alone.
        logging.getLogger("torch.__trace").setLevel(logging.INFO)


_COMPILER_MODULES = ("torch._dynamo", "torch._functorch.config", "torch._inductor.config",
                     "torch._inductor.compile_fx")


def import_compiler() -> None:
    """Import Dynamo and Inductor for the plugin's own use (a check, a test's config patches),
    with their import-time warnings silenced (torch.jit's deprecation notices among them): an
    import the plugin makes must not fail a test under ``-W error``."""
    if all(name in sys.modules for name in _COMPILER_MODULES):
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name in _COMPILER_MODULES:
            importlib.import_module(name)


_FINGERPRINTED_MODULES = ("torch._inductor", "torch._decomp", "torch._refs", "torch._prims", "torch._functorch")


_LOWERING_TABLES = (("torch._inductor.lowering", "lowerings"), ("torch._inductor.decomposition", "decompositions"))
"""Tables a process adds its own entries to (a lowering, a decomposition) and Inductor fills
lazily (an implicit fallback per op without a lowering): compared entry by entry."""


def compiler_fingerprint(modules: Sequence[str] = ()) -> dict[str, str]:
    """What the compiler code of this process is: a digest of each loaded compiler module's
    functions and class methods (Inductor, the decompositions and references it applies, AOT
    autograd), by where their code was defined, and each entry of the lowering and decomposition
    tables. A process that patched compiler code or registered its own (a mock, a lowering)
    differs here from a fresh process; ``modules`` not loaded yet are imported first. The
    plugin's own interception (:func:`intercept_inductor`) is not counted."""
    with not_intercepted():
        return _compiler_fingerprint(modules)


def _compiler_fingerprint(modules: Sequence[str]) -> dict[str, str]:
    for name in modules:
        if name not in sys.modules:
            with contextlib.suppress(Exception), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                importlib.import_module(name)
    entries: dict[str, str] = {}
    for module_name, module in list(sys.modules.items()):
        if module is not None and module_name.startswith(_FINGERPRINTED_MODULES):
            entries[module_name] = _digest("\n".join(_module_code(module_name, vars(module))))
    for module_name, table in _LOWERING_TABLES:
        for key, entry in list(getattr(sys.modules.get(module_name), table, {}).items()):
            if _is_code(entry):
                entries[f"{module_name}.{table}[{key}]"] = _digest(_code_identity(entry))
    return entries


def _digest(text: str) -> str:
    return hashlib.blake2b(text.encode(), digest_size=8).hexdigest()


def _module_code(module_name: str, namespace: dict[str, Any]) -> Iterator[str]:
    for name, value in sorted(namespace.items()):
        if isinstance(value, type):
            if value.__module__ != module_name:
                continue
            for member_name, member in sorted(vars(value).items()):
                if isinstance(member, (staticmethod, classmethod)):
                    member = member.__func__
                elif isinstance(member, property):
                    member = member.fget
                if isinstance(member, functools.partial) and _ROUTED_ORIGINAL in member.keywords:
                    continue
                if _is_code(member):
                    yield f"{name}.{member_name} = {_code_identity(member)}"
        elif _is_code(value):
            yield f"{name} = {_code_identity(value)}"


_ROUTED_ORIGINAL = "_original_impl"
"""Inductor sets routers on its Triton kernel overrides at its first Triton kernel (the
class's ``_setup_libdevice_routing``, fp64 to libdevice), each holding the override it wraps
under this keyword: a process that generated a Triton kernel has not patched the compiler, so
routers are left out (the overrides they route to count where they are defined)."""

_CODE_TYPES = (types.FunctionType, types.MethodType, types.BuiltinFunctionType, functools.partial)


def _is_code(value: Any) -> bool:
    """A function (or a mock standing in for one); not an object that is merely callable, which
    a module may create lazily (a cache, a selector)."""
    return isinstance(value, _CODE_TYPES) or type(value).__module__ == "unittest.mock"


def _code_identity(value: Any, depth: int = 0) -> str:
    """Where a callable's code was defined, with what its closure holds (a registered lowering is
    a wrapper around the function and op it was given), or its type for other callables (a mock)."""
    if isinstance(value, functools.partial):
        return "partial of " + _code_identity(value.func, depth + 1)
    if isinstance(value, types.MethodType):
        value = value.__func__
    if isinstance(value, types.FunctionType):
        code = value.__code__
        text = f"{value.__module__}.{value.__qualname__} at {code.co_filename}:{code.co_firstlineno}"
        if depth < 3 and value.__closure__:
            held = [_held(cell, depth) for cell in value.__closure__]
            text += f" ({', '.join(filter(None, held))})"
        return text
    if isinstance(value, (types.BuiltinFunctionType, types.BuiltinMethodType)):
        return f"builtin {getattr(value, '__module__', None)}.{value.__qualname__}"
    return f"a {type(value).__module__}.{type(value).__qualname__}"


def _held(cell: Any, depth: int) -> str:
    """What a closure cell holds, where it tells one closure of a function from another: a
    function, an op, a plain value."""
    try:
        contents = cell.cell_contents
    except ValueError:  # an empty cell
        return ""
    if isinstance(contents, (types.FunctionType, functools.partial)):
        return _code_identity(contents, depth + 1)
    if isinstance(contents, (str, int, float, bool, torch._ops.OpOverload, torch._ops.OpOverloadPacket)):
        return str(contents)
    return ""


def warm_up_inductor(device: str) -> None:
    """Compile and run a one-op graph on ``device``: a fresh process pays Inductor's one-time
    costs (its compile workers, the device's code generator and runtime) in its first compile."""
    from torch.fx.experimental.proxy_tensor import make_fx

    x = torch.ones(8, device=device)
    compile_graph(make_fx(lambda value: (value.sin() + 1,))(x), [x])(x)


@contextlib.contextmanager
def empty_compile_cache() -> Iterator[None]:
    """Compile into a new, empty Inductor/Triton cache directory (removed afterwards): a timing
    that must not find kernels on disk from an earlier compile."""
    import torch._inductor.utils as inductor_utils

    # Named fresh_inductor_cache before torch 2.8; both names exist in 2.11 and 2.13.
    fresh = getattr(inductor_utils, "fresh_cache", None) or inductor_utils.fresh_inductor_cache
    # Inside a directory of our own: fresh_cache keeps its directory when the body raises.
    with tempfile.TemporaryDirectory(prefix="pytest-torchcompile-cache-") as parent, fresh(dir=parent):
        yield


def is_op_overload(target: Any) -> bool:
    """Whether an FX node target is one overload of an aten (or other registered) op."""
    return isinstance(target, torch._ops.OpOverload)


def is_view_op(target: Any) -> bool:
    """Whether an FX node target returns a view of an input (its storage, no values of its own)."""
    if not isinstance(target, torch._ops.OpOverload):
        return False
    return any(result.alias_info is not None and not result.alias_info.is_write for result in target._schema.returns)


def is_random_op(target: Any) -> bool:
    """Whether an FX node target draws random numbers (Inductor's RNG differs from eager's)."""
    tags = getattr(target, "tags", ())
    return torch.Tag.nondeterministic_seeded in tags


EAGER_RNG_CONFIG: dict[str, Any] = {"fallback_random": True}
"""Inductor config under which compiled random ops call eager's kernels on eager's generator, so
that compiled and eager code seeded alike draw the same numbers (as PyTorch's accuracy runs do)."""


class RandomDrawMismatch(Exception):
    """A replayed run asked for other random draws than the recorded run made."""


@contextlib.contextmanager
def recording_random_draws(draws: list[tuple[Any, Any]]) -> Iterator[None]:
    """Append to ``draws`` what each random op of the block produced."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class Record(TorchDispatchMode):
        def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            out = func(*args, **(kwargs or {}))
            if is_random_op(func):
                values = out if isinstance(out, (tuple, list)) else (out,)
                draws.append((func, [v.detach().clone() if isinstance(v, torch.Tensor) else v for v in values]))
            return out

    with Record():
        yield


@contextlib.contextmanager
def replaying_random_draws(draws: Sequence[tuple[Any, Any]]) -> Iterator[None]:
    """Make the block's random ops return what they drew in a recorded run, in the block's own
    dtype: an fp64 run draws other numbers than an fp32 one for some ops (``torch.rand``, CUDA's
    generators). Dropout's output is recomputed from the recorded mask at the block's precision.
    Raises :class:`RandomDrawMismatch` when the block draws differently from the recording."""
    from torch.utils._python_dispatch import TorchDispatchMode

    pending = list(draws)

    class Replay(TorchDispatchMode):
        def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            out = func(*args, **(kwargs or {}))
            if not is_random_op(func):
                return out
            if not pending or pending[0][0] is not func:
                raise RandomDrawMismatch(f"{func} is not the random op the recorded run drew next")
            _, recorded = pending.pop(0)
            values = list(out) if isinstance(out, (tuple, list)) else [out]
            if func is torch.ops.aten.native_dropout.default and args[2]:
                mask = recorded[1]
                values = [args[0] * mask * (1.0 / (1.0 - args[1])), mask.clone()]
            else:
                for value, drawn in zip(values, recorded, strict=True):
                    if isinstance(value, torch.Tensor):
                        if value.shape != drawn.shape:
                            raise RandomDrawMismatch(f"{func} drew shape {tuple(value.shape)}, "
                                                     f"recorded {tuple(drawn.shape)}")
                        with torch.no_grad():
                            value.copy_(drawn)
            return tuple(values) if isinstance(out, (tuple, list)) else values[0]

    with Replay():
        yield
    if pending:
        raise RandomDrawMismatch(f"{len(pending)} recorded random draw(s) were not made again")


@dataclasses.dataclass(frozen=True)
class OpOrigin:
    """An op a graph calls that ``import torch`` alone may not define, and where it comes from."""

    qualname: str
    """``namespace::name``, as ``torch.ops.namespace.name``."""
    module: str | None
    """The Python module whose import registers it; None when it could not be found."""
    search_path: str | None
    """The ``sys.path`` entry that module imports from (a test module's directory, say)."""


def op_origins(gm: torch.fx.GraphModule) -> list[OpOrigin]:
    """Every op outside ``aten`` that ``gm`` (and the graphs it holds) calls, with the module
    that registers it: Inductor's own prims, ops a model's package or test module registers
    through ``torch.library``, ops of packages such as torchvision, higher-order ops."""
    origins: dict[str, OpOrigin] = {}
    for module in gm.modules():
        if not isinstance(module, torch.fx.GraphModule):
            continue
        for node in module.graph.nodes:
            if node.op != "call_function":
                continue
            qualname = _op_qualname(node.target)
            if qualname is None or qualname.startswith("aten::") or qualname in origins:
                continue
            origins[qualname] = _origin(node.target, qualname)
    return list(origins.values())


_KNOWN_ORIGINS: dict[str, OpOrigin] = {}


def _origin(target: Any, qualname: str) -> OpOrigin:
    """Looked up once per process (the lookup reads every loaded module's path): the module that
    registered an op stays the same, and the minifier asks again for every candidate."""
    known = _KNOWN_ORIGINS.get(qualname)
    if known is None:
        name = _op_module(target, qualname)
        known = _KNOWN_ORIGINS[qualname] = OpOrigin(qualname, name, _search_path(name))
    return known


def _op_qualname(target: Any) -> str | None:
    if isinstance(target, torch._ops.HigherOrderOperator):
        return f"higher_order::{target.name()}"
    if isinstance(target, torch._ops.OpOverload):
        return str(target._schema.name)
    if isinstance(target, torch._ops.OpOverloadPacket):
        return str(target._qualified_op_name)
    return None


_LIBRARY_FILES = re.compile(r"torch/(_library/[^/]+|library|_prims/__init__)\.py$")
"""Files that register ops on behalf of the module that asked: where an op was registered says
nothing about who defined it when it is one of these."""


def _op_module(target: Any, qualname: str) -> str | None:
    namespace, name = qualname.split("::", 1)
    if isinstance(target, torch._ops.HigherOrderOperator):
        return type(target).__module__
    if namespace == "prims":
        # Inductor's prims (the low-memory max pool MaxPool2d lowers to, say) exist only once
        # this module is imported; compiling imports it, tracing a repro's graph does not.
        from torch._inductor import inductor_prims

        if name in vars(inductor_prims):
            return inductor_prims.__name__
    opdef = getattr(getattr(torch._library, "custom_ops", None), "OPDEFS", {}).get(qualname)
    defined_by = getattr(getattr(opdef, "_init_fn", None), "__module__", None)
    if isinstance(defined_by, str) and defined_by != "__main__" and not defined_by.startswith("torch."):
        return defined_by
    try:
        dump = torch._C._dispatch_dump(qualname)
    except RuntimeError:
        dump = ""
    registered = re.search(r"^debug: registered at (.+\.py):\d+$", dump, re.MULTILINE)
    if registered and not _LIBRARY_FILES.search(registered.group(1).replace("\\", "/")):
        module = _module_of_file(registered.group(1))
        if module is not None:
            return module
    top_level = sys.modules.get(namespace)
    return namespace if top_level is not None and getattr(top_level, "__file__", None) else None


def _module_of_file(path: str) -> str | None:
    wanted = os.path.normcase(os.path.realpath(path))
    for name, module in list(sys.modules.items()):
        file = getattr(module, "__file__", None)
        if name != "__main__" and file and os.path.normcase(os.path.realpath(file)) == wanted:
            return name
    return None


def _search_path(name: str | None) -> str | None:
    module = sys.modules.get(name) if name else None
    file = getattr(module, "__file__", None)
    if name is None or name.startswith("torch.") or not file:
        return None
    depth = name.count(".") + (1 if os.path.basename(file).startswith("__init__.") else 0)
    return str(pathlib.Path(file).resolve().parents[depth])


def symbolic_sizes(example_inputs: Sequence[Any]) -> list[list[str] | None]:
    """For each example input, its sizes as strings (symbols such as ``s0`` stay symbolic)."""
    sizes: list[list[str] | None] = []
    for value in example_inputs:
        if isinstance(value, torch.Tensor):
            sizes.append([str(s) for s in value.shape])
        else:
            sizes.append(None)
    return sizes


def environment() -> dict[str, str]:
    """Versions and device names for repro headers and reports."""
    env = {
        "torch": torch.__version__,
        "python": platform.python_version(),
        "cpu": platform.processor() or platform.machine(),
    }
    try:
        import triton

        env["triton"] = triton.__version__
    except ImportError:
        env["triton"] = "not installed"
    if torch.cuda.is_available():
        env["cuda_device"] = torch.cuda.get_device_name()
        env["cuda"] = str(torch.version.cuda)
    return env


@contextlib.contextmanager
def float64_everywhere() -> Iterator[None]:
    """Run code in fp64 even where it names a dtype: ``x.float()``, ``torch.zeros(..., dtype=
    torch.float32)`` and ``prims.convert_element_type(x, torch.float16)`` all produce float64.

    Works at the aten level (a dispatch mode), so it covers eager models and post-AOT graphs alike.
    """
    from torch.utils._python_dispatch import TorchDispatchMode

    low_precision = (torch.float16, torch.bfloat16, torch.float32)

    def widen(value: Any) -> Any:
        return torch.float64 if isinstance(value, torch.dtype) and value in low_precision else value

    reinterpreting = {torch.ops.aten.view.dtype}

    class Float64Mode(TorchDispatchMode):
        def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            kwargs = kwargs or {}
            if func not in reinterpreting:
                args = tuple(widen(a) for a in args)
                kwargs = {k: widen(v) for k, v in kwargs.items()}
            return func(*args, **kwargs)

    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        with Float64Mode(), torch.autocast("cpu", enabled=False):
            if torch.cuda.is_available():
                with torch.autocast("cuda", enabled=False):
                    yield
            else:
                yield
    finally:
        torch.set_default_dtype(previous)


@contextlib.contextmanager
def filling_unwritten(fill: float, allocated: list[int]) -> Iterator[None]:
    """Fill the memory that ``empty``, ``empty_like``, ``empty_strided``, ``new_empty`` and the
    like allocate with ``fill`` (cast to each tensor's dtype), instead of leaving whatever the
    allocator gives, and list in ``allocated`` the size of each tensor so filled. Two runs filled unlike show
    which results depend on memory no op wrote: those are not values.

    Works at the aten level (a dispatch mode), so it covers eager models and graphs alike."""
    from torch.utils._python_dispatch import TorchDispatchMode

    aten = torch.ops.aten
    allocating = {aten.empty, aten.empty_like, aten.empty_strided, aten.new_empty, aten.new_empty_strided,
                  aten.empty_permuted}
    whole = 0 if math.isnan(fill) else int(fill)

    class FillingMode(TorchDispatchMode):
        def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            result = func(*args, **(kwargs or {}))
            if func.overloadpacket in allocating and torch.Tag.out not in func.tags \
                    and isinstance(result, torch.Tensor) and result.numel():
                exact = result.is_floating_point() or result.is_complex()
                result.fill_(fill if exact else bool(whole) if result.dtype == torch.bool else whole)
                allocated.append(result.numel())
            return result

    with FillingMode():
        yield


@contextlib.contextmanager
def strict_dynamo() -> Iterator[None]:
    """Compile errors must surface instead of silently falling back to eager."""
    import torch._dynamo.config as dynamo_config

    with dynamo_config.patch(suppress_errors=False):
        yield


def concrete_int(value: Any) -> int:
    """An int, or a symbolic int's hint (the size it had when traced)."""
    if isinstance(value, torch.SymInt):
        hint = value.node.hint
        return int(hint) if hint is not None else 1
    return int(value)


def cpp_kernels(wrapper: str) -> str | None:
    """The C++ kernels embedded in a CPU wrapper module Inductor generated (None for Triton or
    extern-only code); relies on the layout of that wrapper."""
    kernels = re.findall(r"^(\w+) = async_compile\.cpp(?:_pybinding)?\(.*?r'''\n?(.*?)'''", wrapper, re.M | re.S)
    return "\n\n".join(f"// {name}\n{code.strip()}\n" for name, code in kernels) or None


def probe_cpu_vector_isas() -> None:
    """Run Inductor's probes of the CPU's vector ISAs side by side: a g++ test build and a load
    check each, seconds apiece in a fresh cache directory, which the first CPU compile would
    otherwise run one after another. Results are cached, so the compile then finds them."""
    from torch._inductor import cpu_vec_isa

    if platform.machine() not in ("x86_64", "AMD64"):
        return
    supported = cpu_vec_isa.x86_isa_checker()
    probes = [threading.Thread(target=bool, args=(isa,)) for isa in cpu_vec_isa.supported_vec_isa_list
              if all(flag in supported for flag in str(isa).split())]
    for probe in probes:
        probe.start()
    for probe in probes:
        probe.join()


SubsystemDecision = Callable[[str, str, str], bool]
"""Called as (backend, subsystem, what) wherever Inductor asks its CompilerBisector whether to
skip a subsystem (a pass, a decomposition, one op's lowering); ``what`` names the pass, op or
node ("" where torch gives nothing). True skips it."""


@contextlib.contextmanager
def subsystems_skipped(decide: SubsystemDecision) -> Iterator[bool]:
    """Answer the compiler bisector's questions with ``decide`` while active, without its files
    and environment variables; yields False where the installed torch has no such hook."""
    if not can_skip_subsystems():
        yield False
        return
    from torch._inductor.compiler_bisector import CompilerBisector

    original = CompilerBisector.__dict__["disable_subsystem"]

    def disable_subsystem(cls: Any, backend: str, subsystem: str, debug_info: Any = None) -> bool:
        what = ""
        if debug_info is not None:
            with contextlib.suppress(Exception):
                what = str(debug_info())
        return decide(backend, subsystem, what)

    setattr(CompilerBisector, "disable_subsystem", classmethod(disable_subsystem))  # noqa: B010
    try:
        # A cached compile would skip the passes and lowerings being asked about. (Not
        # force_disable_caches: that one warns, and a run under -W error would fail on it.)
        with no_compile_caches(), inductor_config({"fx_graph_cache": False}):
            yield True
    finally:
        setattr(CompilerBisector, "disable_subsystem", original)  # noqa: B010


def can_skip_subsystems() -> bool:
    """Whether :func:`subsystems_skipped` can skip anything with the installed torch."""
    try:
        from torch._inductor.compiler_bisector import CompilerBisector
    except ImportError:
        return False
    return "disable_subsystem" in CompilerBisector.__dict__


def bisector_config_changes(backend: str) -> list[dict[str, Any]]:
    """The config changes the compiler bisector tries for ``backend`` (e.g. Inductor's
    ``emulate_precision_casts=True``), as config patches; none where torch has no such list."""
    try:
        from torch._inductor import compiler_bisector
    except ImportError:
        return []
    changes = getattr(compiler_bisector, "BACKENDS", {}).get(backend, [])
    return [{change.config_field: change.config_value} for change in changes
            if type(change).__name__ == "ConfigChange" and getattr(change, "config_name", None) == "inductor"]


def inductor_config_default(name: str) -> Any:
    """The default of an Inductor config value (dotted name)."""
    import torch._inductor.config as inductor_config_module

    entries: dict[str, Any] = getattr(inductor_config_module, "_config")  # noqa: B009
    return entries[name].default


def compiler_for_backend(backend: str) -> Callable[[torch.fx.GraphModule, Sequence[Any]], Callable[..., Any]]:
    """Compile a torch-level (Dynamo) graph with the ``torch.compile`` backend ``backend`` into
    a plain callable; compile errors surface here, not at the first call."""

    def compile_graph_with(gm: torch.fx.GraphModule, inputs: Sequence[Any]) -> Callable[..., Any]:
        reset()
        compiled = torch.compile(gm, backend=backend, fullgraph=True)
        with strict_dynamo(), torch.no_grad():
            compiled(*[value.detach().clone() if isinstance(value, torch.Tensor) else value for value in inputs])
        return compiled

    return compile_graph_with


def report_environment() -> dict[str, Any]:
    """Versions, devices and the non-default Inductor config: the ``environment`` of a report."""
    return {**environment(), "inductor_config": inductor_config_diff()}
