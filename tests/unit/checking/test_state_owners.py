"""State that outlives one check has one owner, which ends it: the probe children (the check
runner), the prestarted judging children (the minify phase's coordinator), the compiler
interceptions (the interception itself); no module holds any of it."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
import torch

from pytest_torchcompile.checking.masked import ProbeChildren
from pytest_torchcompile.common.options import CONCURRENT_PROBE_ENV
from pytest_torchcompile.common.run_state import MinifyJob
from pytest_torchcompile.judging.isolation.parent import CHILD_MODULE
from pytest_torchcompile.run.session import SESSION_KEY
from pytest_torchcompile.torch_internals.compiling import import_compiler
from pytest_torchcompile.torch_internals.interception import intercept_inductor, not_intercepted


def _judging_children() -> list[int]:
    """Pids of this process's children that run a judging child."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            command = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        parent = int(stat[stat.rindex(")") + 2 :].split()[1])
        if parent == os.getpid() and CHILD_MODULE.encode() in command:
            found.append(int(entry.name))
    return found


def _started_since(before: set[int], timeout_s: float = 10.0) -> set[int]:
    """The judging children started since ``before`` was taken. Waited for: a child's command
    line reads empty in ``/proc`` between the end of its exec, when ``Popen`` returns, and the
    kernel's setting up of its arguments, a window a loaded machine can hold open."""
    deadline = time.monotonic() + timeout_s
    while not (started := set(_judging_children()) - before) and time.monotonic() < deadline:
        time.sleep(0.05)
    return started


pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc")


def test_probe_children_end_when_their_owner_closes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(CONCURRENT_PROBE_ENV, "1")
    before = set(_judging_children())
    children = ProbeChildren()
    children.start(None)
    assert children.judge(None) is not None and _started_since(before)
    children.close()
    assert set(_judging_children()) <= before


def test_pytest_unconfigure_ends_the_probe_child_and_the_prestarted_judging_child(
    pytester: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    """Both are started while the tests run and were left for this process's exit; their owners
    end them as pytest unconfigures."""
    monkeypatch.setenv(CONCURRENT_PROBE_ENV, "1")
    repro = tmp_path / "repro.py"
    repro.write_text("torch._inductor.config.cpp.inject_relu_bug_TESTING_ONLY = 'accuracy'\n")
    before = set(_judging_children())
    config = pytester.parseconfigure("--compile-accuracy", "-p", "no:xdist")
    probe_child = _started_since(before)
    assert len(probe_child) == 1
    state = config.stash[SESSION_KEY]
    assert state.on_minify_job is not None
    state.on_minify_job(MinifyJob("case", "test_x.py::test", str(repro), 10.0))
    assert len(_started_since(before | probe_child)) == 1, "a prestarted judging child"
    config._ensure_unconfigure()
    assert set(_judging_children()) <= before


def sin(x: torch.Tensor) -> torch.Tensor:
    return x.sin()


def test_a_nested_interception_sets_aside_every_interception_for_the_plugins_own_compiles() -> None:
    import_compiler()
    import torch._inductor.compile_fx as compile_fx_module

    installed = compile_fx_module.compile_fx
    seen: list[str] = []

    def hook(name: str):  # type: ignore[no-untyped-def]
        def inner(gm, inputs, kwargs, compile_it):  # type: ignore[no-untyped-def]
            seen.append(name)
            return compile_it()

        return inner

    with intercept_inductor(hook("outer")), intercept_inductor(hook("inner")):
        intercepting = compile_fx_module.compile_fx
        with not_intercepted():
            assert compile_fx_module.compile_fx is installed
            torch._dynamo.reset()
            torch.compile(sin)(torch.randn(4))
        assert compile_fx_module.compile_fx is intercepting and seen == []
        torch._dynamo.reset()
        torch.compile(sin)(torch.randn(4))
        assert seen == ["inner"]  # the outer interception passes a hooked compile through
    assert compile_fx_module.compile_fx is installed
    torch._dynamo.reset()
