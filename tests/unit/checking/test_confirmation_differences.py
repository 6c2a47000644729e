"""A finding its repro does not confirm in a fresh process says what differed: the repro's graph
judged again here (passing: the repro does not hold what the test ran) and, where it fails here
(the deviation recurs in this process), the code Inductor generates for it here and there."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from torch.fx.experimental.proxy_tensor import make_fx

from pytest_torchcompile.checking.confirmation import Confirmer
from pytest_torchcompile.common.kinds import FailureKind
from pytest_torchcompile.judging.case import ReproCase
from pytest_torchcompile.repros.repro import write_repro

aten = torch.ops.aten


def relu_repro(tmp_path: Path) -> str:
    x = torch.linspace(-2, 2, 16)
    case = ReproCase(
        make_fx(lambda value: (torch.relu(value),))(x), [x], FailureKind.ACCURACY, "relu"
    )
    return str(write_repro(case, tmp_path / "repro.py"))


def test_code_generated_otherwise_here_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from torch._inductor import lowering

    # relu lowered as abs in this process only: its repro fails here, and passes in a fresh process.
    monkeypatch.setitem(lowering.lowerings, aten.relu.default, lowering.lowerings[aten.abs.default])
    confirmer = Confirmer()
    try:
        unreproduced = confirmer.unreproduced(relu_repro(tmp_path))
    finally:
        confirmer.close()
    assert unreproduced is not None and unreproduced.fails_here
    assert "judged in a fresh process, passes" in unreproduced.reason
    assert "generates other code for it than in the fresh process (line " in unreproduced.reason


def test_a_repro_that_passes_here_too_is_said_not_to_hold_what_the_test_ran(tmp_path: Path) -> None:
    confirmer = Confirmer()
    try:
        unreproduced = confirmer.unreproduced(relu_repro(tmp_path))
    finally:
        confirmer.close()
    assert unreproduced is not None and not unreproduced.fails_here
    assert "judged again in this process, the repro's graph passes too" in unreproduced.reason


def test_the_child_started_as_a_check_deviates_is_the_one_that_confirms(tmp_path: Path) -> None:
    """Started ahead (its Python, torch and Inductor load while the check goes on), adopted by the
    confirmation: one child, not two."""
    confirmer = Confirmer()
    try:
        confirmer.prestart("", None)
        assert len(confirmer._prestarted) == 1
        unreproduced = confirmer.unreproduced(relu_repro(tmp_path))
        assert len(confirmer._prestarted) == 0, "adopted"
        confirmer.prestart("", None)
        assert len(confirmer._prestarted) == 0, "a judge of this setup runs already"
    finally:
        confirmer.close()
    assert unreproduced is not None and "judged in a fresh process, passes" in unreproduced.reason


def test_the_child_started_as_checks_begin_confirms_and_is_started_once(tmp_path: Path) -> None:
    """Started before any finding (its setup sent when the confirmation adopts it); once a judge
    of the device runs, later checks start none."""
    confirmer = Confirmer()
    try:
        confirmer.start(None)
        assert len(confirmer._prestarted) == 1
        repro = relu_repro(tmp_path)
        unreproduced = confirmer.unreproduced(repro)
        assert len(confirmer._prestarted) == 0, "adopted"
        assert confirmer.devices == {repro: None}, "judged on the CPU, which the minify phase reads"
        confirmer.start(None)
        assert len(confirmer._prestarted) == 0, "a judge of this device runs already"
    finally:
        confirmer.close()
    assert unreproduced is not None and "judged in a fresh process, passes" in unreproduced.reason
