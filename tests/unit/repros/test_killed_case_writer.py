"""A run killed while it writes a case directory (its new directory complete, not yet in place)
leaves a temporary directory that the next write of that case removes."""

from __future__ import annotations

import multiprocessing
import threading
from pathlib import Path
from typing import Any

import torch
import torch.fx

from pytest_torchcompile.judging.case import ReproCase
from pytest_torchcompile.repros import repro


def one_relu(x: torch.Tensor) -> torch.Tensor:
    return torch.relu(x)


def _write(root: Path) -> Path:
    case = ReproCase(torch.fx.symbolic_trace(one_relu), [torch.ones(4)], "accuracy", "t::relu")
    return repro.write_case(case, root, "t_relu", "this run")


def _stopped_before_replacing(root: str, reached: Any) -> None:
    def stop(*args: Any) -> None:
        reached.set()
        threading.Event().wait()

    repro.replace_directory = stop  # type: ignore[assignment]
    _write(Path(root))


def test_the_next_write_of_a_case_removes_what_a_killed_writer_left(tmp_path: Path) -> None:
    context = multiprocessing.get_context("spawn")
    reached = context.Event()
    writer = context.Process(target=_stopped_before_replacing, args=(str(tmp_path), reached))
    writer.start()
    assert reached.wait(120)
    writer.kill()
    writer.join()
    assert [path.name for path in tmp_path.iterdir() if path.name.endswith(".new")]

    path = _write(tmp_path)

    assert path.is_file()
    assert not [path.name for path in tmp_path.iterdir() if path.name.endswith(".new")]
