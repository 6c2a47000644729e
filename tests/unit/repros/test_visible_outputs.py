"""The outputs AOT autograd told Inductor the user sees keep that mark wherever the graph goes:
Inductor lays such an output out with its traced strides, and the same graph compiles to other
code without the mark (a backward graph of ``diagonal_scatter`` on an expanded gradient came out
wrong on CUDA only with it, and its repro, rebuilt from code, passed)."""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path

import torch
import torch.fx
from torch.fx.experimental.proxy_tensor import make_fx

from pytest_torchcompile.common.files import MINIFIED_NAME
from pytest_torchcompile.common.kinds import FailureKind
from pytest_torchcompile.judging.case import ReproCase
from pytest_torchcompile.judging.slicing import GraphSlicer
from pytest_torchcompile.repros.loading import load_case
from pytest_torchcompile.repros.repro import write_minified, write_repro
from pytest_torchcompile.torch_internals import graph_pickling
from pytest_torchcompile.torch_internals.graph_compile import visible_outputs, with_visible_outputs

RELU_BUG = "torch._inductor.config.cpp.inject_relu_bug_TESTING_ONLY = 'accuracy'"


def scatter_and_view(t: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    expanded = t.expand(8, 8)
    zeros = torch.full((8,), 0.0, dtype=torch.float32)
    return torch.diagonal_scatter(expanded, zeros), expanded.diagonal(), torch.relu(expanded - 0.5)


def marked_case(visible: list[int] | None) -> ReproCase:
    t = torch.tensor(1.0)
    gm = with_visible_outputs(make_fx(scatter_and_view)(t), visible)
    return ReproCase(gm, [t], FailureKind.ACCURACY, "tests::visible", config_source=RELU_BUG)


def test_a_repro_file_keeps_the_outputs_marked_visible(tmp_path: Path) -> None:
    path = write_repro(marked_case([0, 2]), tmp_path / "repro.py")
    assert visible_outputs(load_case(path).gm) == [0, 2]

    unmarked = write_repro(marked_case(None), tmp_path / "unmarked" / "repro.py")
    assert visible_outputs(load_case(unmarked).gm) is None


def test_a_compact_file_keeps_the_outputs_marked_visible_and_runs(tmp_path: Path) -> None:
    path = write_minified(marked_case([0, 1, 2]), tmp_path / MINIFIED_NAME)
    text = path.read_text()
    assert "the full form" not in text
    assert visible_outputs(load_case(path).gm) == [0, 1, 2]
    assert sum("user_visible_output_idxs" in line for line in text.splitlines()) == 1, (
        "one line says it"
    )
    ran = subprocess.run(
        [sys.executable, path.name], cwd=path.parent, capture_output=True, text=True, timeout=300
    )
    assert ran.returncode == 1 and ran.stdout.splitlines()[-1] == "REPRODUCED", ran


def test_a_graph_sent_to_another_process_keeps_the_outputs_marked_visible() -> None:
    buffer = io.BytesIO()
    torch.save(marked_case([1]).gm, buffer, pickle_module=graph_pickling)
    buffer.seek(0)
    assert visible_outputs(torch.load(buffer, weights_only=False)) == [1]


def test_a_candidate_keeps_the_marks_of_the_outputs_it_returns_and_shows_its_own() -> None:
    case = marked_case([1])
    slicer = GraphSlicer(case.gm, case.inputs)
    candidate, _ = slicer.slice(set(slicer.order))
    assert visible_outputs(candidate) == [1]

    scatter = next(
        node
        for node in case.gm.graph.nodes
        if node.target == torch.ops.aten.diagonal_scatter.default
    )
    expanded = scatter.args[0]
    cut, _ = slicer.slice({slicer.unit_of[expanded]}, outputs=[expanded])
    assert visible_outputs(cut) == [0], (
        "a value the graph did not return is the smaller graph's own output"
    )


def test_an_unmarked_graph_gives_unmarked_candidates() -> None:
    case = marked_case(None)
    slicer = GraphSlicer(case.gm, case.inputs)
    assert visible_outputs(slicer.slice(set(slicer.order))[0]) is None
