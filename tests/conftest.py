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
from types import ModuleType
from typing import TYPE_CHECKING, Any

import pytest
from hypothesis import HealthCheck, settings

if TYPE_CHECKING:
    from pytest_torchcompile.checking.masked import ProbeChildren
    from pytest_torchcompile.judging.judge import GraphVerdict

# Compiling a graph takes about a second on a CPU: hypothesis' default deadline would flag it.
settings.register_profile(
    "repo",
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    print_blob=True,
)
settings.load_profile("repo")


_SET_BY_TORCH_ON_FIRST_USE = {
    "PYTEST_CURRENT_TEST",
    "TORCHINDUCTOR_CACHE_DIR",
    "_TORCHINDUCTOR_PYOBJECT_TENSOR_DATA_PTR",
    "TRITON_CACHE_DIR",
    "TRITON_PTXAS_PATH",
}
"""Environment variables pytest, or torch the first time it compiles in a process (the Triton
ones at its first Triton kernel, on a GPU), sets for the whole process: not left by a run."""


def _process_state(config: pytest.Config) -> dict[str, object]:
    """What an in-process run could change for the runs after it: read without importing
    anything (torch's parts only where already imported)."""
    loggers = {
        name: logger
        for name, logger in logging.Logger.manager.loggerDict.items()
        if name.startswith("torch") and isinstance(logger, logging.Logger)
    }
    state: dict[str, object] = {
        "environment": {k: v for k, v in os.environ.items() if k not in _SET_BY_TORCH_ON_FIRST_USE},
        "warnings filters": list(warnings.filters),
        "loggers": {
            name: (logger.level, _handlers(logger), logger.propagate, logger.disabled)
            for name, logger in [("root", logging.getLogger()), *loggers.items()]
        },
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
            state[f"{name}, hidden"] = sorted(
                key
                for key, entry in getattr(module, "_config", {}).items()
                if getattr(entry, "hide", False)
            )
    return state


def _handlers(logger: logging.Logger) -> list[logging.Handler]:
    """A logger's handlers but torch's own, which torch sets up anew as it pleases (its
    structured-trace handler goes when a compile re-reads its log settings)."""
    return [
        handler for handler in logger.handlers if not type(handler).__module__.startswith("torch.")
    ]


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
    differences = {
        key: _difference(before[key], after[key]) for key in before.keys() & after.keys()
    }
    changed = {key: difference for key, difference in differences.items() if difference}
    assert not changed, f"an in-process run changed this process's state (before, after): {changed}"


class _LibraryKeeper:
    """A plugin given to every in-process run: at the run's end, before pytester drops from
    ``sys.modules`` whatever the run imported, it notes the modules that are not the run's own
    (test modules and conftests under the temporary directory, which the next run writes anew
    under the same names)."""

    def __init__(self, runs_root: Path, kept: dict[str, ModuleType]) -> None:
        self.runs_root, self.kept = runs_root, kept

    @pytest.hookimpl(trylast=True)
    def pytest_unconfigure(self) -> None:
        for name, module in list(sys.modules.items()):
            file = getattr(module, "__file__", None)
            if file is None or not Path(file).resolve().is_relative_to(self.runs_root):
                self.kept[name] = module


_KEPT_LIBRARIES = pytest.StashKey[dict[str, ModuleType]]()


@pytest.fixture(autouse=True)
def _inline_runs_keep_imported_libraries(request: pytest.FixtureRequest) -> Iterator[None]:
    """pytester's in-process runs (``pytester.runpytest``) drop from ``sys.modules`` whatever a
    run imported, after the run and again after the test. torch does not survive that: its
    modules imported again beside the old ones register their operators twice and crash the
    process. The libraries a run imported (``pytester`` below notes them) go back into
    ``sys.modules`` after each run and, from here (set up before pytester, torn down after it),
    after pytester's teardown."""
    if "pytester" not in request.fixturenames:
        yield
        return
    kept = request.node.stash[_KEPT_LIBRARIES] = {}
    yield
    _put_back(kept)


@pytest.fixture
def pytester(
    pytester: pytest.Pytester,
    request: pytest.FixtureRequest,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[pytest.Pytester]:
    """pytest's own, its in-process runs given a plugin that notes the libraries they import."""
    kept = request.node.stash[_KEPT_LIBRARIES]
    keeper = _LibraryKeeper(tmp_path_factory.getbasetemp().resolve(), kept)
    inline_run = pytester.inline_run

    def keeping_libraries(*args: Any, plugins: Any = (), **kwargs: Any) -> pytest.HookRecorder:
        # A run's test module named as one of this suite's (test_model.py) is the run's to
        # import: this suite's module of that name steps aside during the run.
        aside = {
            path.stem: sys.modules.pop(path.stem)
            for path in Path.cwd().glob("*.py")
            if path.stem in sys.modules
            and getattr(sys.modules[path.stem], "__file__", None) != str(path)
        }
        try:
            return inline_run(*args, plugins=[*plugins, keeper], **kwargs)
        finally:
            _put_back(kept)
            _put_back(aside)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(pytester, "inline_run", keeping_libraries)
        yield pytester


def _put_back(modules: dict[str, ModuleType]) -> None:
    for name, module in modules.items():
        sys.modules.setdefault(name, module)


def _difference(before: object, after: object) -> object:
    """What differs; of the loggers, only those that existed before (torch creates its own as it
    imports its modules)."""
    if isinstance(before, dict) and isinstance(after, dict):
        keys = before.keys() if "root" in before else before.keys() | after.keys()
        return {
            key: (before.get(key), after.get(key))
            for key in keys
            if before.get(key) != after.get(key)
        }
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
    from pytest_torchcompile.common.options import CONCURRENT_PROBE_ENV
    from pytest_torchcompile.judging.isolation.parent import IsolatedJudge

    monkeypatch.setenv(CONCURRENT_PROBE_ENV, "1")
    verdicts: list[GraphVerdict] = []
    judge_prepared = IsolatedJudge.judge_prepared

    def recorded(self: IsolatedJudge, *args: object) -> GraphVerdict:
        verdicts.append(judge_prepared(self, *args))  # type: ignore[arg-type]
        return verdicts[-1]

    monkeypatch.setattr(IsolatedJudge, "judge_prepared", recorded)
    return verdicts
