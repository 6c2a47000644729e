"""Inductor's compiler bisector: skipping its subsystems, the config changes it tries."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

from pytest_torchcompile.torch_internals.compiling import no_compile_caches
from pytest_torchcompile.torch_internals.config import inductor_config

# Imports inside functions: Dynamo's and Inductor's modules load when a compile needs them, as
# a test's own compile would load them, not with this module (their import-time warnings and
# state are the test's).

SubsystemDecision = Callable[[str, str, str], bool]
"""Called as (backend, subsystem, what) wherever Inductor asks its CompilerBisector whether to
skip a subsystem (a pass, a decomposition, one op's lowering); ``what`` names the pass, op or
node ("" where torch gives nothing). True skips it. Every graph pass Inductor runs through its
transform observer is asked about too, as (``"inductor"``, :data:`GRAPH_PASSES`, pass name):
many (``remove_noop_ops``, ``pass_pattern_0``...) belong to no subsystem the bisector knows."""

GRAPH_PASSES = "graph_passes"
"""The pseudo-subsystem under which :func:`subsystems_skipped` asks about every named graph pass."""


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
        with (
            no_compile_caches(),
            inductor_config({"fx_graph_cache": False}),
            _graph_passes_asked(decide),
        ):
            yield True
    finally:
        setattr(CompilerBisector, "disable_subsystem", original)  # noqa: B010


@contextlib.contextmanager
def _graph_passes_asked(decide: SubsystemDecision) -> Iterator[None]:
    """Ask ``decide`` about each graph pass the transform observer is about to run, before the
    observer's own check (the bisector's subsystem, ``disabled_passes``); nothing where this
    torch's observer has no such check."""
    observer = _transform_observer()
    if observer is None:
        yield
        return
    original = observer.__dict__["_check_disable_pass"]

    def check_disable_pass(self: Any) -> bool:
        return decide("inductor", GRAPH_PASSES, str(self.passname)) or original(self)

    setattr(observer, "_check_disable_pass", check_disable_pass)  # noqa: B010
    try:
        yield
    finally:
        setattr(observer, "_check_disable_pass", original)  # noqa: B010


def _transform_observer() -> Any:
    """torch's GraphTransformObserver where it checks each pass before running it, else None."""
    try:
        from torch.fx.passes.graph_transform_observer import GraphTransformObserver
    except ImportError:
        return None
    return (
        GraphTransformObserver if "_check_disable_pass" in GraphTransformObserver.__dict__ else None
    )


def graph_pass_switch_missing() -> str | None:
    """The internal that switching a named graph pass off needs and this torch lacks; None where
    it has it."""
    return (
        None
        if _transform_observer() is not None
        else "torch.fx.passes.graph_transform_observer.GraphTransformObserver._check_disable_pass"
    )


def can_skip_subsystems() -> bool:
    """Whether :func:`subsystems_skipped` can skip anything with the installed torch."""
    try:
        from torch._inductor.compiler_bisector import CompilerBisector
    except ImportError:
        return False
    return "disable_subsystem" in CompilerBisector.__dict__


def subsystem_switch_missing() -> str | None:
    """The internal :func:`subsystems_skipped` needs that this torch lacks; None where it has it."""
    return (
        None
        if can_skip_subsystems()
        else "torch._inductor.compiler_bisector.CompilerBisector.disable_subsystem"
    )


def config_changes_missing() -> str | None:
    """The internal :func:`bisector_config_changes` reads that this torch lacks; None where it has it."""
    try:
        from torch._inductor import compiler_bisector
    except ImportError:
        return "torch._inductor.compiler_bisector"
    return (
        None
        if isinstance(getattr(compiler_bisector, "BACKENDS", None), dict)
        else "torch._inductor.compiler_bisector.BACKENDS"
    )


def bisector_config_changes(backend: str) -> list[dict[str, Any]]:
    """The config changes the compiler bisector tries for ``backend`` (e.g. Inductor's
    ``emulate_precision_casts=True``), as config patches; none where torch has no such list."""
    try:
        from torch._inductor import compiler_bisector
    except ImportError:
        return []
    if config_changes_missing() is not None:
        return []
    changes: list[Any] = compiler_bisector.BACKENDS.get(backend, [])
    return [
        {change.config_field: change.config_value}
        for change in changes
        if type(change).__name__ == "ConfigChange"
        and getattr(change, "config_name", None) == "inductor"
    ]
