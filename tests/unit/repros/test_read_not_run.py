"""What is read from a repro file to list, group or match it (its ops, its failure kind) is read
from its text: a file planted among known cases runs none of its code."""

from __future__ import annotations

import operator
from pathlib import Path

import pytest
import torch
import torch.fx
from torch.fx.experimental.proxy_tensor import make_fx

from pytest_torchcompile.common.files import MINIFIED_NAME, REPRO_NAME
from pytest_torchcompile.common.kinds import FailureKind
from pytest_torchcompile.hunting.causes import known_cases
from pytest_torchcompile.judging.case import ReproCase
from pytest_torchcompile.judging.judge import DYNAMO
from pytest_torchcompile.judging.stages import graph_ops
from pytest_torchcompile.repros.loading import load_case
from pytest_torchcompile.repros.reading import file_graph_ops, file_recorded_kind
from pytest_torchcompile.repros.repro import write_minified, write_repro

PLANTED = "open({marker!r}, 'w').close()\n"


def one_relu(x: torch.Tensor) -> tuple[torch.Tensor]:
    return (torch.relu(x),)


def torch_level(x: torch.Tensor, out: torch.Tensor) -> tuple[torch.Tensor, ...]:
    y = torch.nn.functional.gelu(x).sum(dim=0)
    return (-y + x.abs() * 2 > 0, x.shape[0] // 2)


def assigns_into() -> torch.fx.GraphModule:
    """``out[:] = relu(x); out += 1; return (out * 2,)`` as Dynamo writes it."""
    graph = torch.fx.Graph()
    x_node, out_node = graph.placeholder("x"), graph.placeholder("out")
    relu = graph.call_function(torch.relu, (x_node,))
    graph.call_function(operator.setitem, (out_node, slice(None), relu))
    added = graph.call_function(operator.iadd, (out_node, 1.0))
    graph.output((graph.call_function(operator.mul, (added, 2)),))
    return torch.fx.GraphModule(torch.nn.Module(), graph)


def cases() -> list[tuple[str, ReproCase]]:
    x, out = torch.randn(4, 8), torch.zeros(4, 8)
    return [
        ("post_aot", ReproCase(make_fx(one_relu)(x), [x], FailureKind.ACCURACY, "t::a")),
        (
            "torch_level",
            ReproCase(torch.fx.symbolic_trace(torch_level), [x, out], "runtime_error", "t::b"),
        ),
        (
            "assigns",
            ReproCase(assigns_into(), [x, out], FailureKind.ACCURACY, "t::c", level=DYNAMO),
        ),
    ]


@pytest.mark.parametrize(("name", "case"), cases(), ids=[name for name, _ in cases()])
@pytest.mark.parametrize("form", [REPRO_NAME, MINIFIED_NAME])
def test_the_ops_read_from_a_file_are_those_of_its_graph(
    tmp_path: Path, name: str, case: ReproCase, form: str
) -> None:
    path = tmp_path / form
    (write_repro if form == REPRO_NAME else write_minified)(case, path)

    assert file_graph_ops(path) == graph_ops(load_case(path).gm)
    assert file_recorded_kind(path) == case.kind


def test_a_known_case_is_read_without_running_its_file(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    x = torch.randn(8)
    known = tmp_path / "known"
    path = write_minified(
        ReproCase(make_fx(one_relu)(x), [x], FailureKind.ACCURACY, "t::relu"),
        known / "relu" / MINIFIED_NAME,
    )
    # Below the header, which makes the file a repro: above it, the file would be none.
    source = path.read_text().replace(
        "class Repro(torch.nn.Module):",
        PLANTED.format(marker=str(marker)) + "class Repro(torch.nn.Module):",
    )
    path.write_text(source)
    notes: list[str] = []

    assert known_cases([known], notes.append) == {(FailureKind.ACCURACY, ("aten.relu",)): "relu"}
    assert not marker.exists() and notes == []
