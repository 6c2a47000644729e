"""Test ids and paths a shell or a terminal would misread, in a whole run: with pytest's raw ids
(its ``disable_test_id_escaping_and_forfeit_all_rights_to_community_support`` ini option) an id
holding a tab costs no baseline row and an ANSI escape in one does not reach the terminal raw
from the plugin's summary; the ``rerun:`` hint of a repro in a directory holding a space and a
``$`` is quoted for the shell."""

from __future__ import annotations

import os
import shlex
import subprocess

import pytest

pytest_plugins = ["pytester"]


@pytest.fixture(autouse=True)
def wide_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    """These tests read whole lines: a run's output wraps them at the terminal's width."""
    monkeypatch.setenv("COLUMNS", "400")


RAW_IDS = """
[pytest]
disable_test_id_escaping_and_forfeit_all_rights_to_community_support = true
"""

SUITE = """
import pytest
import torch


@pytest.fixture
def bug(name):
    import torch._inductor.config as config
    with config.patch({"cpp.inject_relu_bug_TESTING_ONLY": "accuracy" if name == "bug" else None}):
        yield


@pytest.mark.parametrize("name", ["bug", "tab\\there", "ansi\\x1b[31mred"])
def test_mlp(compile_accuracy, bug, name):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
    compile_accuracy(model, torch.randn(4, 8))
"""

TAB_ID, ANSI_ID = "test_model.py::test_mlp[tab\there]", "test_model.py::test_mlp[ansi\x1b[31mred]"


def test_hostile_ids_and_a_hostile_repro_directory(pytester: pytest.Pytester) -> None:
    pytester.makeini(RAW_IDS)
    pytester.makepyfile(test_model=SUITE)
    baseline = pytester.path / "baseline.txt"
    repros = pytester.path / "my repros $HOME"
    result = pytester.runpytest(
        "--compile-accuracy",
        "--no-compile-accuracy-minify",
        f"--compile-accuracy-dir={repros}",
        f"--compile-accuracy-baseline={baseline}",
        "--compile-accuracy-update-baseline",
    )
    output = result.stdout.str()
    assert result.ret == pytest.ExitCode.OK, output  # a recording run
    # Every row kept, the tab's as a JSON string that reads back as the id.
    from pytest_torchcompile.reporting.baseline_file import load_baseline

    assert {
        entry.test_id: str(entry.expected) for entry in load_baseline(baseline).entries.values()
    } == {"test_model.py::test_mlp[bug]": "fail_accuracy", TAB_ID: "pass", ANSI_ID: "pass"}
    assert '"test_model.py::test_mlp[tab\\there]"\tpass' in baseline.read_text().splitlines()
    # The plugin's section shows the escape as text; pytest's own lines are pytest's.
    section = output[output.index("= compile accuracy =") :]
    assert "\x1b" not in section and "\t" not in section, section
    assert "test_model.py::test_mlp[ansi\\x1b[31mred]" in section
    # The rerun hint runs as pasted into a shell. (Under CI=true pytest's short summary repeats
    # the whole failure message, the hint's line among them.)
    (rerun,) = {line for line in output.splitlines() if line.startswith("rerun: ")}
    repro = repros / "test_model.py__test_mlp_bug" / "repro.py"
    assert rerun == f"rerun: python {shlex.quote(os.path.relpath(repro))}"
    pasted = subprocess.run(
        ["sh", "-c", f"ls {rerun.removeprefix('rerun: python ')}"],
        capture_output=True,
        text=True,
        cwd=pytester.path,
        env={**os.environ, "HOME": "/nonexistent"},
    )
    assert pasted.returncode == 0, pasted.stderr
