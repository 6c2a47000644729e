"""A repro directory that turns read-only (or full) during the minify phase: the case was
minified, its files could not be written, and the result says that, not that the minifier
crashed; the unminified repro is kept."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest
import torch
from torch.fx.experimental.proxy_tensor import make_fx

from pytest_torchcompile.common.kinds import FailureKind
from pytest_torchcompile.common.results import StopReason
from pytest_torchcompile.judging.case import ReproCase
from pytest_torchcompile.minifying import repro_file
from pytest_torchcompile.repros.repro import write_repro


def relu(x: torch.Tensor) -> torch.Tensor:
    return torch.relu(x) + 1


def test_a_minified_case_whose_files_cannot_be_written_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    x = torch.randn(16)
    case = ReproCase(
        make_fx(relu)(x),
        [x],
        FailureKind.ACCURACY,
        "test_x",
        config_source="torch._inductor.config.cpp.inject_relu_bug_TESTING_ONLY = 'accuracy'",
    )
    repro = write_repro(case, tmp_path / "case" / "repro.py")

    def read_only(*args: object, **kwargs: object) -> Path:
        raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(repro.parent / "minified.py"))

    monkeypatch.setattr(repro_file, "write_minified", read_only)
    result = repro_file.minify_repro(repro, isolate=False, find_stage=False)
    assert result.stop is StopReason.UNWRITTEN and result.path is None
    assert result.summary_line("test_x") == (
        f"not minified test_x: its files could not be written: Read-only file system in {repro.parent}; "
        f"unminified repro kept: {repro}"
    )
    assert sorted(path.name for path in repro.parent.iterdir()) == ["repro.py"]
