"""Routing every Inductor compile of a block through a hook, plain ``torch.compile`` calls included,
and setting the routing aside for the plugin's own compiles; made as the compiler is imported
where it is not yet (an import hook)."""

from __future__ import annotations

import contextlib
import importlib
import importlib.abc
import importlib.machinery
import inspect
import sys
import types
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import torch
import torch.fx

from pytest_torchcompile.torch_internals.compiling import (
    CompiledGraph,
    DynamoCompileHook,
    InnerCompileHook,
    import_compiler,
    mode_patches,
    no_compile_caches,
    reset,
)
from pytest_torchcompile.torch_internals.config import (
    config_values,
    inductor_config,
    tracing_part,
    where_random,
)

# Imports inside functions: Dynamo's and Inductor's modules load when a compile needs them, as
# a test's own compile would load them, not with this module (their import-time warnings and
# state are the test's).


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
    (:func:`config.where_random`), the torch-level graph under their :func:`config.tracing_part`."""
    from torch._inductor.compile_fx import compile_fx, compile_fx_inner

    patches = mode_patches(mode, options)

    def backend(gm: torch.fx.GraphModule, example_inputs: Sequence[Any]) -> Any:
        outside = config_values(tracing_part(random_config))

        def inner_compile(
            lowered: torch.fx.GraphModule, inputs: Sequence[Any], **kwargs: Any
        ) -> Any:
            with inductor_config(where_random(lowered, random_config, outside)):
                return hook(
                    lowered, inputs, kwargs, lambda: compile_fx_inner(lowered, inputs, **kwargs)
                )

        def compile_all() -> Any:
            # Without AOT autograd's cache: where it answers, no inner compile runs, and ``hook``
            # would see nothing of the graph it was handed to capture.
            with inductor_config(tracing_part(random_config)), no_compile_caches():
                return compile_fx(
                    gm, example_inputs, inner_compile=inner_compile, config_patches=patches
                )

        return (
            dynamo_hook(gm, example_inputs, compile_all)
            if dynamo_hook is not None
            else compile_all()
        )

    return backend


@contextlib.contextmanager
def intercept_inductor(
    hook: InnerCompileHook, dynamo_hook: DynamoCompileHook | None = None
) -> Iterator[None]:
    """Route every Inductor compilation started while active (plain ``torch.compile(model)``
    included) through ``hook``, and the torch-level graph it starts from through ``dynamo_hook``;
    each compiles without the caches that would skip ``hook``, and otherwise as its caller set it
    up, config and all: the code it makes is the caller's. A test that compiles nothing pays only
    the swap of one attribute, and where the compiler is not imported yet, not even its import
    (the swap is made as the block imports it, if it does).

    ``torch.compile``'s default backend and the registered "inductor" backend both look
    ``compile_fx`` up on its module at call time, so replacing that attribute catches them while
    leaving other backends untouched.
    """
    intercepted: list[tuple[types.ModuleType, Any]] = []

    def intercept(compile_fx_module: types.ModuleType) -> None:
        if _interception_missing_in(compile_fx_module) is not None:
            return  # this torch compiles otherwise: its compiles go unjudged, as features_off says
        original = compile_fx_module.compile_fx

        def compile_fx(model: Any, example_inputs: Any, *args: Any, **kwargs: Any) -> Any:
            if (
                kwargs.get("inner_compile", compile_fx_module.compile_fx_inner)
                is not compile_fx_module.compile_fx_inner
            ):
                return original(model, example_inputs, *args, **kwargs)

            def inner_compile(
                gm: torch.fx.GraphModule, inputs: Sequence[Any], **inner_kwargs: Any
            ) -> Any:
                # Here too: a backward graph is compiled at its first call, after compile_fx returned.
                with no_compile_caches():
                    return hook(
                        gm,
                        inputs,
                        inner_kwargs,
                        lambda: compile_fx_module.compile_fx_inner(gm, inputs, **inner_kwargs),
                    )

            kwargs["inner_compile"] = inner_compile
            with no_compile_caches():
                if dynamo_hook is None:
                    return original(model, example_inputs, *args, **kwargs)
                return dynamo_hook(
                    model, example_inputs, lambda: original(model, example_inputs, *args, **kwargs)
                )

        # The interception itself says what it replaced: the compile_fx installed before any.
        setattr(compile_fx, _INSTALLED, getattr(original, _INSTALLED, original))
        compile_fx_module.compile_fx = compile_fx  # type: ignore[attr-defined]
        intercepted.append((compile_fx_module, original))

    try:
        with _on_import(_COMPILE_FX_MODULE, intercept):
            yield
    finally:
        for compile_fx_module, original in reversed(intercepted):
            compile_fx_module.compile_fx = original


_COMPILE_FX_MODULE = "torch._inductor.compile_fx"


def interception_missing() -> str | None:
    """The internal :func:`intercept_inductor` needs that this torch lacks; None where it has all
    (the compiler is imported for the answer)."""
    import_compiler()
    return _interception_missing_in(sys.modules[_COMPILE_FX_MODULE])


def _interception_missing_in(compile_fx_module: types.ModuleType) -> str | None:
    for name in ("compile_fx", "compile_fx_inner"):
        if not callable(getattr(compile_fx_module, name, None)):
            return f"{_COMPILE_FX_MODULE}.{name}"
    compile_fx = compile_fx_module.compile_fx
    try:
        parameters = inspect.signature(getattr(compile_fx, _INSTALLED, compile_fx)).parameters
    except (TypeError, ValueError):  # no signature to read: taken as it is documented
        return None
    if "inner_compile" in parameters:
        return None
    return f"{_COMPILE_FX_MODULE}.compile_fx's inner_compile argument"


_INSTALLED = "_pytest_torchcompile_installed"
"""Attribute of an intercepting ``compile_fx``: the one installed before any interception."""


def post_aot_graphs(gm: torch.fx.GraphModule, inputs: Sequence[Any]) -> list[tuple[str, str]]:
    """Compile a torch-level graph through the whole stack and return, for each graph Inductor
    lowered, its kind and code: what AOT autograd and the decompositions made of ``gm``."""
    graphs: list[tuple[str, str]] = []

    def hook(
        lowered: torch.fx.GraphModule,
        example_inputs: Sequence[Any],
        kwargs: dict[str, Any],
        compile_fn: Callable[[], CompiledGraph],
    ) -> CompiledGraph:
        kind = (
            "backward"
            if kwargs.get("is_backward")
            else "inference"
            if kwargs.get("is_inference")
            else "forward"
        )
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

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: types.ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname != self._name or self not in sys.meta_path:
            return None
        for finder in sys.meta_path[sys.meta_path.index(self) + 1 :]:
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


@contextlib.contextmanager
def not_intercepted() -> Iterator[None]:
    """Compile with Inductor as installed while the block runs, inside ``intercept_inductor``
    too: the plugin's own compiles (a check, judging a graph standalone) are not compiles of
    the test, and judging them again would report one bug twice."""
    # Imported first: an interception waiting for the compiler's import is made, and set aside here.
    import_compiler()
    import torch._inductor.compile_fx as compile_fx_module

    intercepting = compile_fx_module.compile_fx
    installed = getattr(intercepting, _INSTALLED, None)
    if installed is None:
        yield
        return
    compile_fx_module.compile_fx = installed
    try:
        yield
    finally:
        compile_fx_module.compile_fx = intercepting


@contextlib.contextmanager
def outside_dispatch_modes() -> Iterator[None]:
    """No dispatch mode active while the block runs: a compiled graph's first call runs inside
    AOT autograd's mode that checks custom ops for aliasing, which refuses tensor types it does
    not know (a library's tensor subclass), and the copies and reruns that judge the call are no
    part of it."""
    from torch.utils._python_dispatch import _disable_current_modes

    with _disable_current_modes():
        yield
