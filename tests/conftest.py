"""Settings and fixtures for this repository's own test suite. Imports no torch: a test that
needs none (the run layer's, the dependency rule's) runs without it."""

from __future__ import annotations

import logging
import os
import signal
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import _pytest.pytester
import pytest
from hypothesis import HealthCheck, settings

if TYPE_CHECKING:
    from pytest_torchcompile.checking.masked import ProbeChildren
    from pytest_torchcompile.judging.judge import GraphVerdict

# Compiling a graph takes about a second on a CPU: hypothesis' default deadline would flag it.
settings.register_profile(
    "repo", deadline=None, suppress_health_check=[HealthCheck.too_slow], print_blob=True,
)
settings.load_profile("repo")


@pytest.fixture(scope="session", autouse=True)
def _inline_runs_keep_imported_libraries(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """pytester's in-process runs (``pytester.runpytest``) drop from ``sys.modules`` whatever a
    run imported. torch does not survive that: its modules imported again beside the old ones
    register their operators twice and crash the process. Keep every module but the runs' own
    (test modules and conftests under the temporary directory), which the next run writes anew
    under the same names."""
    runs_root = tmp_path_factory.getbasetemp().resolve()

    def written_by_a_run(name: str) -> bool:
        file = getattr(sys.modules.get(name), "__file__", None)
        return file is not None and Path(file).resolve().is_relative_to(runs_root)

    class KeepLibraries(_pytest.pytester.SysModulesSnapshot):
        def __init__(self, preserve: Any = None) -> None:
            super().__init__(preserve=lambda name: not written_by_a_run(name))
            # A run's test module named as one of this suite's (test_model.py) is the run's to
            # import: this suite's module of that name steps aside until the snapshot is restored.
            for path in Path.cwd().glob("*.py"):
                module = sys.modules.get(path.stem)
                if module is not None and getattr(module, "__file__", None) != str(path):
                    del sys.modules[path.stem]

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_pytest.pytester, "SysModulesSnapshot", KeepLibraries)
        yield


_SET_BY_TORCH_ON_FIRST_USE = {"PYTEST_CURRENT_TEST", "TORCHINDUCTOR_CACHE_DIR", "_TORCHINDUCTOR_PYOBJECT_TENSOR_DATA_PTR",
                              "TRITON_CACHE_DIR", "TRITON_PTXAS_PATH"}
"""Environment variables pytest, or torch the first time it compiles in a process (the Triton
ones at its first Triton kernel, on a GPU), sets for the whole process: not left by a run."""


def _process_state(config: pytest.Config) -> dict[str, object]:
    """What an in-process run could change for the runs after it: read without importing
    anything (torch's parts only where already imported)."""
    loggers = {name: logger for name, logger in logging.Logger.manager.loggerDict.items()
               if name.startswith("torch") and isinstance(logger, logging.Logger)}
    state: dict[str, object] = {
        "environment": {k: v for k, v in os.environ.items() if k not in _SET_BY_TORCH_ON_FIRST_USE},
        "warnings filters": list(warnings.filters),
        "loggers": {name: (logger.level, _handlers(logger), logger.propagate, logger.disabled)
                    for name, logger in [("root", logging.getLogger()), *loggers.items()]},
        "signal handlers": [signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)],
        "plugins": sorted(name for name, _ in config.pluginmanager.list_name_plugin()),
        "meta path": list(sys.meta_path),
    }
    torch = sys.modules.get("torch")
    if torch is not None:
        state["torch threads"] = torch.get_num_threads()
        state["torch flags frozen"] = torch.backends.flags_frozen()
        state["torch deterministic"] = torch.are_deterministic_algorithms_enabled()
        state["torch default dtype"] = torch.get_default_dtype()
    for name in ("torch._inductor.config", "torch._dynamo.config", "torch._functorch.config"):
        module = sys.modules.get(name)
        if module is not None:
            state[name] = module.get_config_copy()
            # Deleted entries (pytest's monkeypatch undo deletes what it set through a config proxy).
            state[f"{name}, hidden"] = sorted(key for key, entry in getattr(module, "_config", {}).items()
                                              if getattr(entry, "hide", False))
    return state


def _handlers(logger: logging.Logger) -> list[logging.Handler]:
    """A logger's handlers but torch's own, which torch sets up anew as it pleases (its
    structured-trace handler goes when a compile re-reads its log settings)."""
    return [handler for handler in logger.handlers if not type(handler).__module__.startswith("torch.")]


@pytest.fixture(autouse=True)
def _inline_runs_leave_no_state(request: pytest.FixtureRequest) -> Iterator[None]:
    """A test that runs pytest in this process (through ``pytester``) leaves this process as it
    found it: else a later test would pass or fail by the order the tests ran in. Set up before
    ``pytester`` and checked after its teardown. A run that cannot help changing the process
    (xdist, signals, process-wide patches) goes through ``pytester.runpytest_subprocess``."""
    if "pytester" not in request.fixturenames:
        yield
        return
    before = _process_state(request.config)
    yield
    after = _process_state(request.config)
    differences = {key: _difference(before[key], after[key]) for key in before.keys() & after.keys()}
    changed = {key: difference for key, difference in differences.items() if difference}
    assert not changed, f"an in-process run changed this process's state (before, after): {changed}"


def _difference(before: object, after: object) -> object:
    """What differs; of the loggers, only those that existed before (torch creates its own as it
    imports its modules)."""
    if isinstance(before, dict) and isinstance(after, dict):
        keys = before.keys() if "root" in before else before.keys() | after.keys()
        return {key: (before.get(key), after.get(key)) for key in keys if before.get(key) != after.get(key)}
    return (before, after) if before != after else None


@pytest.fixture
def probe_children() -> Iterator[ProbeChildren]:
    """Children for a check's probes, ended after the test."""
    from pytest_torchcompile.checking.masked import ProbeChildren

    children = ProbeChildren()
    yield children
    children.close()


@pytest.fixture
def child_verdicts(monkeypatch: pytest.MonkeyPatch) -> list[GraphVerdict]:
    """Every probe verdict a child gives, with probes sent to a child whatever their size."""
    from pytest_torchcompile.checking.masked import CONCURRENT_PROBE_ENV
    from pytest_torchcompile.judging.isolation.parent import IsolatedJudge

    monkeypatch.setenv(CONCURRENT_PROBE_ENV, "1")
    verdicts: list[GraphVerdict] = []
    judge_prepared = IsolatedJudge.judge_prepared

    def recorded(self: IsolatedJudge, *args: object) -> GraphVerdict:
        verdicts.append(judge_prepared(self, *args))  # type: ignore[arg-type]
        return verdicts[-1]

    monkeypatch.setattr(IsolatedJudge, "judge_prepared", recorded)
    return verdicts
