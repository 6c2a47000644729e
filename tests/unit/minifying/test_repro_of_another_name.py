"""A repro minified under a name of its own (``minify bug.py``): its bug report is of that file,
written beside it, where one was looked for in a ``repro.py`` that is not there."""

from __future__ import annotations

from pathlib import Path

import torch
from torch.fx.experimental.proxy_tensor import make_fx

from pytest_torchcompile.common.files import BUG_REPORT_NAME, MINIFIED_NAME
from pytest_torchcompile.common.kinds import FailureKind
from pytest_torchcompile.common.results import StopReason
from pytest_torchcompile.judging.case import ReproCase
from pytest_torchcompile.minifying.repro_file import minify_repro
from pytest_torchcompile.repros.repro import write_repro


def relu(x: torch.Tensor) -> torch.Tensor:
    return torch.relu(x) + 1


def test_a_repro_of_another_name_gets_its_minified_file_and_bug_report(tmp_path: Path) -> None:
    x = torch.randn(16)
    case = ReproCase(
        make_fx(relu)(x),
        [x],
        FailureKind.ACCURACY,
        "tests/m.py::test_x",
        config_source="torch._inductor.config.cpp.inject_relu_bug_TESTING_ONLY = 'accuracy'",
        status_line="fail_accuracy: 1 of 1 outputs deviate",
    )
    repro = write_repro(case, tmp_path / "bug.py")
    result = minify_repro(repro, isolate=False, find_stage=False)
    assert result.stop is StopReason.MINIMAL, result.note
    assert result.path == str(tmp_path / MINIFIED_NAME)
    report = (tmp_path / BUG_REPORT_NAME).read_text()
    assert (
        "found by pytest-torchcompile in `tests/m.py::test_x` and minified from 2 ops to 1"
        in report
    )
