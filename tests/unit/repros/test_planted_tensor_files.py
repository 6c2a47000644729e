"""A pickle planted in a case's ``tensors/`` is loaded as data only by every reader: the full
repro, the compact minified file, its copy in ``bug_report.md`` and the plugin itself, even under
``TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD=1`` (which torch applies only to loads that leave
``weights_only`` unset)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch
from torch.fx.experimental.proxy_tensor import make_fx

from pytest_torchcompile.common.files import MINIFIED_NAME, REPRO_NAME
from pytest_torchcompile.judging.case import ReproCase
from pytest_torchcompile.judging.judge import ReproBroken
from pytest_torchcompile.repros import loading, repro
from pytest_torchcompile.repros.bug_report import bug_report

PLANTED = "open({marker!r}, 'w').close()\n"


def one_relu(x: torch.Tensor) -> tuple[torch.Tensor]:
    return (torch.relu(x),)


def _case() -> ReproCase:
    inputs = [torch.randn(16, 32)]  # more than a file inlines: its values go to tensors/
    return ReproCase(
        make_fx(one_relu)(*inputs),
        inputs,
        "accuracy",
        "tests::planted",
        config_source="torch._inductor.config.cpp.inject_relu_bug_TESTING_ONLY = 'accuracy'",
        status_line="accuracy (minified 1 -> 1 ops)",
    )


def _plant(case_dir: Path, marker: Path) -> None:
    class Payload:
        def __reduce__(self) -> tuple[Any, ...]:
            return (exec, (PLANTED.format(marker=str(marker)),))

    for tensor in (case_dir / repro.TENSOR_DIR).iterdir():
        torch.save({"t": Payload()}, tensor)


def _run_unforced_loads(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, path.name],
        cwd=path.parent,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD": "1"},
    )


@pytest.fixture
def case_dir(tmp_path: Path) -> Path:
    directory = tmp_path / "case"
    repro.write_repro(_case(), directory / REPRO_NAME)
    path = repro.write_minified(_case(), directory / MINIFIED_NAME)
    assert not path.read_text().startswith("# pytest-torchcompile repro:"), "the compact form"
    return directory


def test_a_compact_file_and_its_bug_report_copy_load_tensors_as_data_only(
    tmp_path: Path, case_dir: Path
) -> None:
    marker = tmp_path / "ran"
    pasted = re.search(r"```python\n(.*?)\n```", bug_report(case_dir / REPRO_NAME), re.DOTALL)
    assert pasted is not None
    (case_dir / "pasted.py").write_text(pasted.group(1))
    _plant(case_dir, marker)
    for name in (MINIFIED_NAME, "pasted.py", REPRO_NAME):
        ran = _run_unforced_loads(case_dir / name)
        assert ran.returncode == 3, (name, ran)
        assert "Weights only load failed" in ran.stdout + ran.stderr, (name, ran)
        assert not marker.exists(), name


def test_the_plugin_reads_a_planted_tensor_file_as_data_only(
    tmp_path: Path, case_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    marker = tmp_path / "ran"
    _plant(case_dir, marker)
    monkeypatch.setenv("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", "1")
    for name in (MINIFIED_NAME, REPRO_NAME):
        with pytest.raises(ReproBroken, match="Weights only load failed"):
            loading.load_case(case_dir / name)
    assert not marker.exists()
