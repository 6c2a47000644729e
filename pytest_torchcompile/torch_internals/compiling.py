"""Compiling FX graphs with Inductor and the whole stack, the compiler's caches and one-time costs, Dynamo's state."""

from __future__ import annotations

import contextlib
import importlib
import importlib.abc
import importlib.machinery
import logging
import os
import platform
import re
import sys
import tempfile
import threading
import warnings
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import torch
import torch.fx

from pytest_torchcompile.torch_internals.graph_compile import compile_graph

# Imports inside functions: Dynamo's and Inductor's modules load when a compile needs them, as
# a test's own compile would load them, not with this module (their import-time warnings and
# state are the test's).

CompiledGraph = Callable[[list[Any]], Any]
"""A compiled FX graph in Inductor's boxed calling convention: takes a list, returns a sequence."""


InnerCompileHook = Callable[
    [torch.fx.GraphModule, Sequence[Any], dict[str, Any], Callable[[], CompiledGraph]],
    CompiledGraph,
]
"""Called with (post-AOT graph, fake example inputs, Inductor kwargs, a function that compiles the
graph); returns the callable Inductor should use. The hook sees the graph before Inductor's passes
rewrite it and sees compile errors."""


DynamoCompileHook = Callable[[torch.fx.GraphModule, Sequence[Any], Callable[[], Any]], Any]
"""Called with (Dynamo's torch-level graph, its example inputs, a function that compiles it through
AOT autograd, decompositions and Inductor); returns the callable Dynamo should use."""


def generated_source(compiled: Callable[..., Any]) -> str | None:
    """The kernel source Inductor generated (C++ or Triton wrapper module) for a compiled graph."""
    inner = getattr(compiled, "inductor_compiled", compiled)
    source = getattr(inner, "source_code", None)
    return source if isinstance(source, str) else None


def first_missing_attribute(
    names: Sequence[tuple[str, str]], holds: Callable[[Any], bool] = lambda value: True
) -> str | None:
    """The first ``module.attribute`` of ``names`` that the installed torch lacks (or whose value
    ``holds`` refuses), or the module that does not import; None where it has them all. The
    modules are imported for the answer, with their import-time warnings kept quiet."""
    missing = object()
    for module_name, attribute in names:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                module = importlib.import_module(module_name)
            except ImportError:
                return module_name
        value = getattr(module, attribute, missing)
        if value is missing or not holds(value):
            return f"{module_name}.{attribute}"
    return None


def compiler_names(keyword: str) -> list[str]:
    """The names ``torch.compile`` takes for ``keyword``: the backends registered (``"backend"``:
    the debugging and experimental ones too) or Inductor's modes (``"mode"``)."""
    import_compiler()
    if keyword == "backend":
        return list(torch.compiler.list_backends(exclude_tags=()))
    from torch._inductor import list_mode_options

    return list(list_mode_options())


def mode_patches(mode: str | None, options: dict[str, Any] | None) -> dict[str, Any]:
    from torch._inductor import list_mode_options

    patches: dict[str, Any] = {}
    if mode and mode != "default":
        patches.update(list_mode_options(mode))
    patches.update(options or {})
    return patches


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


def quiet_trace_log() -> Callable[[], None]:
    """Keep torch's structured-trace logger out of captured logs. It logs at DEBUG with empty
    messages (its payload goes to TORCH_TRACE files), and pytest attaches its capture handlers to
    it, so every compile adds hundreds of empty lines to a failing test's report. Left alone when
    TORCH_TRACE asks for the trace. Returns what gives the logger its level back."""
    logger = logging.getLogger("torch.__trace")
    level = logger.level
    if not os.environ.get("TORCH_TRACE"):
        # torch's trace logger decides by its own level alone.
        logger.setLevel(logging.INFO)
    return lambda: logger.setLevel(level)


_COMPILER_MODULES = (
    "torch._dynamo",
    "torch._functorch.config",
    "torch._inductor.config",
    "torch._inductor.compile_fx",
)


def compiler_imported() -> bool:
    """Whether Dynamo and Inductor are imported in this process (a compile imports them)."""
    return all(name in sys.modules for name in _COMPILER_MODULES)


def import_compiler() -> None:
    """Import Dynamo and Inductor for the plugin's own use (a check, a test's config patches),
    with their import-time warnings silenced (torch.jit's deprecation notices among them): an
    import the plugin makes must not fail a test under ``-W error``."""
    if compiler_imported():
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name in _COMPILER_MODULES:
            importlib.import_module(name)


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
    with (
        tempfile.TemporaryDirectory(prefix="pytest-torchcompile-cache-") as parent,
        fresh(dir=parent),
    ):
        yield


def compile_errors_suppressed() -> bool:
    """Whether Dynamo runs a frame eagerly where its compile fails, instead of raising the error
    to the code that called it (``torch._dynamo.config.suppress_errors``)."""
    import torch._dynamo.config as dynamo_config

    return bool(dynamo_config.suppress_errors)


@contextlib.contextmanager
def strict_dynamo() -> Iterator[None]:
    """Compile errors must surface instead of silently falling back to eager."""
    import torch._dynamo.config as dynamo_config

    with dynamo_config.patch(suppress_errors=False):
        yield


def cpp_kernels(wrapper: str) -> str | None:
    """The C++ kernels embedded in a CPU wrapper module Inductor generated (None for Triton or
    extern-only code); relies on the layout of that wrapper."""
    kernels = re.findall(
        r"^(\w+) = async_compile\.cpp(?:_pybinding)?\(.*?r'''\n?(.*?)'''", wrapper, re.M | re.S
    )
    return "\n\n".join(f"// {name}\n{code.strip()}\n" for name, code in kernels) or None


def probe_cpu_vector_isas() -> None:
    """Run Inductor's probes of the CPU's vector ISAs side by side: a g++ test build and a load
    check each, seconds apiece in a fresh cache directory, which the first CPU compile would
    otherwise run one after another. Results are cached, so the compile then finds them."""
    if platform.machine() not in ("x86_64", "AMD64") or vector_isa_probe_missing() is not None:
        return
    from torch._inductor import cpu_vec_isa

    supported = cpu_vec_isa.x86_isa_checker()
    probes = [
        threading.Thread(target=bool, args=(isa,))
        for isa in cpu_vec_isa.supported_vec_isa_list
        if all(flag in supported for flag in str(isa).split())
    ]
    for probe in probes:
        probe.start()
    for probe in probes:
        probe.join()


def vector_isa_probe_missing() -> str | None:
    """What :func:`probe_cpu_vector_isas` uses that this torch lacks; None where it has it all."""
    try:
        from torch._inductor import cpu_vec_isa
    except ImportError:
        return "torch._inductor.cpu_vec_isa"
    for name in ("x86_isa_checker", "supported_vec_isa_list"):
        if not hasattr(cpu_vec_isa, name):
            return f"torch._inductor.cpu_vec_isa.{name}"
    return None


def compiler_for_backend(
    backend: str,
) -> Callable[[torch.fx.GraphModule, Sequence[Any]], Callable[..., Any]]:
    """Compile a torch-level (Dynamo) graph with the ``torch.compile`` backend ``backend`` into
    a plain callable; compile errors surface here, not at the first call."""

    def compile_graph_with(gm: torch.fx.GraphModule, inputs: Sequence[Any]) -> Callable[..., Any]:
        reset()
        compiled = torch.compile(gm, backend=backend, fullgraph=True)
        with strict_dynamo(), torch.no_grad():
            compiled(
                *[
                    value.detach().clone() if isinstance(value, torch.Tensor) else value
                    for value in inputs
                ]
            )
        return compiled

    return compile_graph_with
