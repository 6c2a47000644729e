"""What a graph writes into its inputs is judged as its outputs are: by the judge (the minifier's
candidates, the confirmation) and by the repro file, which embeds it."""

from __future__ import annotations

import operator
import subprocess
import sys
from pathlib import Path

import torch
from torch.fx.experimental.proxy_tensor import make_fx

from pytest_torchcompile.common.kinds import FailureKind
from pytest_torchcompile.judging.case import ReproCase
from pytest_torchcompile.judging.judge import REPRODUCED_EXIT, judge_graph, mutated_input_path
from pytest_torchcompile.judging.mutation import may_write_inputs, mutated_inputs, operator_name
from pytest_torchcompile.repros.repro import write_repro
from pytest_torchcompile.torch_internals.config import inductor_config

RELU_BUG = "torch._inductor.config.cpp.inject_relu_bug_TESTING_ONLY = 'accuracy'"


def write_relu_into(dst: torch.Tensor, src: torch.Tensor) -> tuple[torch.Tensor]:
    """Returns a value the relu bug leaves right; the relu goes only into ``dst``."""
    dst.copy_(torch.relu(src))
    return (src * 2,)


def graph_and_inputs() -> tuple[torch.fx.GraphModule, list[torch.Tensor]]:
    inputs = [torch.zeros(16), torch.linspace(-2, 2, 16)]
    return make_fx(write_relu_into)(*[value.clone() for value in inputs]), inputs


def test_a_graph_that_copies_into_an_input_may_write_inputs() -> None:
    gm, _ = graph_and_inputs()
    assert may_write_inputs(gm)
    assert not may_write_inputs(make_fx(lambda x: (torch.relu(x) * 2,))(torch.ones(4)))


def test_an_item_assignment_of_a_torch_level_graph_writes_an_argument() -> None:
    graph = torch.fx.Graph()
    x = graph.placeholder("x")
    graph.call_function(operator.setitem, (x, 0, 1.0))
    graph.output((graph.call_function(operator.add, (x, 1)),))
    gm = torch.fx.GraphModule(torch.nn.Module(), graph)
    assert may_write_inputs(gm)
    assert [
        operator_name(node.target) for node in gm.graph.nodes if node.op == "call_function"
    ] == ["setitem", "add"]
    assert operator_name(torch.add) is None


def test_the_inputs_a_graph_writes_into_are_found_by_an_eager_run() -> None:
    gm, inputs = graph_and_inputs()
    assert mutated_inputs(gm, inputs) == [0]
    assert torch.equal(inputs[0], torch.zeros(16)), "found on copies"
    assert mutated_inputs(make_fx(lambda x: (torch.relu(x),))(inputs[1]), inputs[1:]) == []


def test_a_wrong_value_written_into_an_input_fails_the_graph() -> None:
    gm, inputs = graph_and_inputs()
    with inductor_config({"cpp.inject_relu_bug_TESTING_ONLY": "accuracy"}):
        verdict = judge_graph(gm, inputs, 1e-4, check_non_float=True)
    assert verdict.failure == FailureKind.ACCURACY
    assert [leaf.path for leaf in verdict.leaves if not leaf.passed] == [mutated_input_path(0)]


def test_the_repro_of_a_wrong_value_written_into_an_input_reproduces(tmp_path: Path) -> None:
    gm, inputs = graph_and_inputs()
    case = ReproCase(
        gm, inputs, FailureKind.ACCURACY, "writes into an input", config_source=RELU_BUG
    )
    repro = write_repro(case, tmp_path / "repro.py")
    run = subprocess.run(
        [sys.executable, repro.name], cwd=repro.parent, capture_output=True, text=True, timeout=600
    )
    assert run.returncode == REPRODUCED_EXIT, run.stdout + run.stderr
    assert f"{mutated_input_path(0)}" in run.stdout
