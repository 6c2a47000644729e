"""The compact minified repro: short, runnable with torch alone, judging as the plugin does; the
full form where the compact one cannot express a case, with the reason in its header."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.fx
from torch.fx.experimental.proxy_tensor import make_fx

from pytest_torchcompile.judging import rule
from pytest_torchcompile.judging.case import ReproCase
from pytest_torchcompile.judging.isolation.parent import InProcessJudge
from pytest_torchcompile.judging.isolation.protocol import JudgeSettings
from pytest_torchcompile.judging.judge import ACCURACY, COMPILE_ERROR, RUNTIME_ERROR
from pytest_torchcompile.repros.compact import RULE_FUNCTIONS, compact_disagreement
from pytest_torchcompile.repros.repro import MINIFIED_NAME, load_case, load_repro, write_minified
from pytest_torchcompile.repros.runtime import embedded_source

RELU_BUG = "torch._inductor.config.cpp.inject_relu_bug_TESTING_ONLY = {!r}"
FULL_FORM = "# note:    the full form, not the compact one: "
TORCH_MINIFIED_LINES = 80
"""torch's own minified repro of a one-relu graph (``after_aot``'s, 10 config lines of them)."""


def one_relu(x: torch.Tensor) -> tuple[torch.Tensor]:
    return (torch.relu(x),)


def minified(tmp_path: Path, fn: Callable[..., Any], inputs: list[Any], kind: str = ACCURACY,
             config: str = RELU_BUG.format("accuracy"), **fields: Any) -> Path:
    case = ReproCase(make_fx(fn)(*inputs), inputs, kind, "tests::minified", config_source=config,
                     status_line=f"{kind} (minified 9 -> 1 ops)", **fields)
    return write_minified(case, tmp_path / MINIFIED_NAME)


def run(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, path.name], cwd=path.parent, capture_output=True, text=True, timeout=300)


def test_a_one_relu_accuracy_bug_is_compact_runs_alone_and_reproduces(tmp_path: Path) -> None:
    path = minified(tmp_path, one_relu, [torch.randn(16, 32)])
    lines = path.read_text().splitlines()

    assert not any(line.startswith(FULL_FORM) for line in lines)
    assert len(lines) <= TORCH_MINIFIED_LINES, len(lines)
    assert any(line.startswith("class Repro(") for line in lines[:15]), "the graph near the top"
    assert [line for line in lines if line.startswith("torch._inductor.config.")] == [RELU_BUG.format("accuracy")]
    reproduced = run(path)
    assert (reproduced.returncode, reproduced.stdout.splitlines()[-1]) == (1, "REPRODUCED"), reproduced
    assert "fp64 rmse FAIL" in reproduced.stdout

    path.write_text(path.read_text().replace(RELU_BUG.format("accuracy"), ""))
    fixed = run(path)
    assert fixed.returncode == 0 and "bug is fixed" in fixed.stdout, fixed


def test_the_compact_file_copies_the_rule_the_plugin_runs(tmp_path: Path) -> None:
    source = minified(tmp_path, one_relu, [torch.randn(8)]).read_text()

    for function in RULE_FUNCTIONS[ACCURACY]:
        assert embedded_source(function) in source
    assert embedded_source(rule.leaf_verdict).count("\n") > 10


@pytest.mark.parametrize("kind", [COMPILE_ERROR, RUNTIME_ERROR])
def test_compile_and_runtime_errors_reproduce_compactly(tmp_path: Path, kind: str) -> None:
    inputs = [torch.randn(16)]
    with InProcessJudge(RELU_BUG.format(kind)) as judge:
        recorded = judge(make_fx(one_relu)(*inputs), inputs, JudgeSettings())
    assert recorded.failure == kind

    path = minified(tmp_path, one_relu, inputs, kind, RELU_BUG.format(kind), expected_error=recorded.error)

    assert not path.read_text().count(FULL_FORM)
    done = run(path)
    assert done.returncode == 1 and "REPRODUCED" in done.stdout, done
    assert load_case(path).expected_error == recorded.error


def with_random(x: torch.Tensor) -> tuple[torch.Tensor]:
    return (torch.relu(x) + torch.rand_like(x),)


def writes_its_input(x: torch.Tensor) -> tuple[torch.Tensor]:
    x.add_(1.0)  # a change whatever x holds (tracing runs it on the inputs too)
    return (torch.relu(x),)


def with_unwritten(x: torch.Tensor) -> tuple[torch.Tensor]:
    out = torch.empty(8, 4)
    out[:, :2] = torch.relu(x)
    return (out,)


@pytest.mark.parametrize(("fn", "inputs", "reason"), [
    (with_random, [torch.randn(8)], "random ops"),
    (with_unwritten, [torch.randn(8, 2)], "memory no op writes"),
    (one_relu, [torch.randn(4, 1).expand(4, 4)], "an input laid out with gaps, overlaps or an offset"),
    (one_relu, [torch.randn(8, requires_grad=True)], "inputs that require grad"),
    (writes_its_input, [torch.randn(8)], "a graph that writes into its inputs"),
], ids=["random", "unwritten", "overlapping", "requires_grad", "mutating"])
def test_a_case_the_compact_form_cannot_express_keeps_the_full_form_and_says_why(
    tmp_path: Path, fn: Callable[..., Any], inputs: list[Any], reason: str,
) -> None:
    path = minified(tmp_path, fn, inputs)

    note = next(line for line in path.read_text().splitlines() if line.startswith(FULL_FORM))
    assert reason in note
    assert load_case(path).op_count == ReproCase(make_fx(fn)(*inputs), inputs, ACCURACY, "t").op_count


def test_a_compact_file_that_traces_another_graph_is_not_kept(tmp_path: Path) -> None:
    """A factory op on no traced value: plain tracing, as the compact file traces, runs it once
    and keeps a constant, so the compiler would not see the op."""
    graph = torch.fx.Graph()
    x = graph.placeholder("x")
    constant = graph.call_function(torch.ops.aten.scalar_tensor.default, (0.1,))
    relu = graph.call_function(torch.ops.aten.relu.default, (x,))
    graph.output((graph.call_function(torch.ops.aten.add.Tensor, (relu, constant)),))
    case = ReproCase(torch.fx.GraphModule(torch.nn.Module(), graph), [torch.randn(8)], ACCURACY, "t",
                     config_source=RELU_BUG.format("accuracy"))

    path = write_minified(case, tmp_path / MINIFIED_NAME)

    assert f"{FULL_FORM}its graph traces to other ops" in path.read_text()
    assert load_case(path).op_count == 3


def test_a_compact_file_whose_references_differ_from_the_plugins_is_found_out(tmp_path: Path) -> None:
    inputs = [torch.randn(8)]
    case = ReproCase(make_fx(one_relu)(*inputs), inputs, ACCURACY, "t", config_source=RELU_BUG.format("accuracy"))
    path = write_minified(case, tmp_path / MINIFIED_NAME)
    assert compact_disagreement(load_repro(path).module, case) is None

    path.write_text(path.read_text().replace("return gm(*copies(inputs)), wide(", "return gm(*copies(inputs, torch.float16)), wide("))
    assert compact_disagreement(load_repro(path).module, case) == "its eager run gives other values than the plugin's"


def test_a_compact_file_that_cannot_run_never_exits_as_reproduced(tmp_path: Path) -> None:
    path = minified(tmp_path, one_relu, [torch.randn(8)])
    path.write_text(path.read_text().replace(RELU_BUG.format("accuracy"),
                                             "torch._inductor.config.no_such_knob_in_any_torch = 1"))

    assert run(path).returncode == 3


def test_ops_that_torch_itself_registers_on_import_of_a_module_stay_compact(tmp_path: Path) -> None:
    import torch._inductor.inductor_prims

    def fused(x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor]:
        return (torch.relu(torch.ops.prims.fma.default(x, y, x)),)

    path = minified(tmp_path, fused, [torch.randn(8), torch.randn(8)])

    source = path.read_text()
    assert FULL_FORM not in source
    assert "import torch._inductor.inductor_prims  # registers prims::fma" in source
    assert run(path).returncode == 1
