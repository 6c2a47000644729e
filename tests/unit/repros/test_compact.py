"""The compact minified repro: short, runnable with torch alone, judging as the plugin does; the
full form where the compact one cannot express a case, with the reason in its header."""

from __future__ import annotations

import ast
import math
import operator
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.fx
from torch.fx.experimental.proxy_tensor import make_fx

from pytest_torchcompile.common.files import MINIFIED_NAME
from pytest_torchcompile.common.kinds import FailureKind
from pytest_torchcompile.judging import rule
from pytest_torchcompile.judging.case import ReproCase
from pytest_torchcompile.judging.isolation.parent import InProcessJudge
from pytest_torchcompile.judging.isolation.protocol import JudgeSettings
from pytest_torchcompile.judging.judge import DYNAMO
from pytest_torchcompile.repros.compact import (
    COMPACT,
    RULE_FUNCTIONS,
    compact_disagreement,
    compact_obstacle,
)
from pytest_torchcompile.repros.loading import load_case, load_repro
from pytest_torchcompile.repros.rendering import render_repro
from pytest_torchcompile.repros.repro import write_minified
from pytest_torchcompile.repros.runtime import embedded_source, read_module
from pytest_torchcompile.torch_internals.graph_compile import VISIBLE_OUTPUTS_KEY
from tests.unit.repros.test_embedded import names_defined_twice, pyflakes_messages, top_level_names

RELU_BUG = "torch._inductor.config.cpp.inject_relu_bug_TESTING_ONLY = {!r}"
FULL_FORM = "# note:    the full form, not the compact one: "
DECLARED_FOR_COMPACT = set(
    top_level_names(
        ast.parse(
            (
                Path(__file__).parents[3]
                / "pytest_torchcompile"
                / "repros"
                / "embedded"
                / "declared_compact.pyi"
            ).read_text()
        )
    )
)
"""The names the compact code declares for the type checker beside ``declared.pyi``'s."""
TORCH_MINIFIED_LINES = 80
"""torch's own minified repro of a one-relu graph (``after_aot``'s, 10 config lines of them)."""


def one_relu(x: torch.Tensor) -> tuple[torch.Tensor]:
    return (torch.relu(x),)


def minified(
    tmp_path: Path,
    fn: Callable[..., Any],
    inputs: list[Any],
    kind: str = FailureKind.ACCURACY,
    config: str = RELU_BUG.format("accuracy"),
    **fields: Any,
) -> Path:
    case = ReproCase(
        make_fx(fn)(*inputs),
        inputs,
        kind,
        "tests::minified",
        config_source=config,
        status_line=f"{kind} (minified 9 -> 1 ops)",
        **fields,
    )
    return write_minified(case, tmp_path / MINIFIED_NAME)


def run(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, path.name], cwd=path.parent, capture_output=True, text=True, timeout=300
    )


def test_a_one_relu_accuracy_bug_is_compact_runs_alone_and_reproduces(tmp_path: Path) -> None:
    path = minified(tmp_path, one_relu, [torch.randn(16, 32)])
    lines = path.read_text().splitlines()

    assert not any(line.startswith(FULL_FORM) for line in lines)
    assert len(lines) <= TORCH_MINIFIED_LINES, len(lines)
    assert any(line.startswith("class Repro(") for line in lines[:15]), "the graph near the top"
    assert [line for line in lines if line.startswith("torch._inductor.config.")] == [
        RELU_BUG.format("accuracy")
    ]
    reproduced = run(path)
    assert (reproduced.returncode, reproduced.stdout.splitlines()[-1]) == (1, "REPRODUCED"), (
        reproduced
    )
    # Each figure is named: the two errors of the fp64 rule and its multiplier.
    assert re.search(
        r"fp64 rmse FAIL rmse\(compiled,fp64\) \S+ rmse\(eager,fp64\) \S+ multiplier 3$",
        reproduced.stdout,
        re.MULTILINE,
    ), reproduced.stdout

    path.write_text(path.read_text().replace(RELU_BUG.format("accuracy"), ""))
    fixed = run(path)
    assert fixed.returncode == 0 and "bug is fixed" in fixed.stdout, fixed


def test_the_compact_file_copies_the_rule_the_plugin_runs(tmp_path: Path) -> None:
    source = minified(tmp_path, one_relu, [torch.randn(8)]).read_text()

    for function in RULE_FUNCTIONS[FailureKind.ACCURACY]:
        assert embedded_source(function) in source
    assert embedded_source(rule.leaf_verdict).count("\n") > 10


# The runtime error runs in the slow step (a fresh process each); the compile error by default.
@pytest.mark.parametrize(
    "kind",
    [FailureKind.COMPILE_ERROR, pytest.param(FailureKind.RUNTIME_ERROR, marks=pytest.mark.slow)],
)
def test_compile_and_runtime_errors_reproduce_compactly(tmp_path: Path, kind: str) -> None:
    inputs = [torch.randn(16)]
    with InProcessJudge(RELU_BUG.format(str(kind))) as judge:
        recorded = judge(make_fx(one_relu)(*inputs), inputs, JudgeSettings())
    assert recorded.failure == kind

    path = minified(
        tmp_path, one_relu, inputs, kind, RELU_BUG.format(str(kind)), expected_error=recorded.error
    )

    assert not path.read_text().count(FULL_FORM)
    done = run(path)
    assert done.returncode == 1 and "REPRODUCED" in done.stdout, done
    assert load_case(path).expected_error == recorded.error


def with_random(x: torch.Tensor) -> tuple[torch.Tensor]:
    return (torch.relu(x) + torch.rand_like(x),)


def with_unwritten(x: torch.Tensor) -> tuple[torch.Tensor]:
    out = torch.empty(8, 4)
    out[:, :2] = torch.relu(x)
    return (out,)


@pytest.mark.parametrize(
    ("fn", "inputs", "reason"),
    [
        (with_random, [torch.randn(8)], "random ops"),
        (with_unwritten, [torch.randn(8, 2)], "memory no op writes"),
        (
            one_relu,
            [torch.arange(10.0).as_strided((4, 3), (2, 1))],
            "an input whose elements share memory other than",
        ),
        (one_relu, [torch.randn(8, requires_grad=True)], "inputs that require grad"),
    ],
    ids=["random", "unwritten", "overlapping", "requires_grad"],
)
def test_a_case_the_compact_form_cannot_express_keeps_the_full_form_and_says_why(
    tmp_path: Path,
    fn: Callable[..., Any],
    inputs: list[Any],
    reason: str,
) -> None:
    path = minified(tmp_path, fn, inputs)

    note = next(line for line in path.read_text().splitlines() if line.startswith(FULL_FORM))
    assert reason in note
    assert (
        load_case(path).op_count
        == ReproCase(make_fx(fn)(*inputs), inputs, FailureKind.ACCURACY, "t").op_count
    )


def relu_plus_a_made_constant() -> ReproCase:
    """A graph with a factory op on no traced value, as Inductor's graphs hold them (``full``,
    ``iota``, ``scalar_tensor``): fx's plain tracing would run it once and keep a constant."""
    graph = torch.fx.Graph()
    x = graph.placeholder("x")
    constant = graph.call_function(torch.ops.aten.scalar_tensor.default, (0.1,))
    relu = graph.call_function(torch.ops.aten.relu.default, (x,))
    graph.output((graph.call_function(torch.ops.aten.add.Tensor, (relu, constant)),))
    return ReproCase(
        torch.fx.GraphModule(torch.nn.Module(), graph),
        [torch.randn(8)],
        FailureKind.ACCURACY,
        "t",
        config_source=RELU_BUG.format("accuracy"),
    )


@pytest.mark.slow  # runs its file in a fresh process; the one-relu test above does so by default
def test_ops_that_make_a_tensor_from_no_input_stay_ops_of_the_compact_graph(tmp_path: Path) -> None:
    path = write_minified(relu_plus_a_made_constant(), tmp_path / MINIFIED_NAME)

    assert FULL_FORM not in path.read_text()
    assert [
        str(node.target) for node in load_case(path).gm.graph.nodes if node.op == "call_function"
    ] == ["aten.scalar_tensor.default", "aten.relu.default", "aten.add.Tensor"]
    assert run(path).returncode == 1


def test_a_compact_file_that_traces_another_graph_is_not_kept(tmp_path: Path) -> None:
    case = relu_plus_a_made_constant()
    path = write_minified(case, tmp_path / MINIFIED_NAME)
    source = path.read_text()
    assert "if _holds_proxy((args, kwargs)) or" in source
    path.write_text(source.replace("if _holds_proxy((args, kwargs)) or", "if True or"))

    assert compact_disagreement(load_repro(path).module, case) == "its graph traces to other ops"


def writes_relu_into(x: torch.Tensor, out: torch.Tensor) -> tuple[torch.Tensor]:
    out.add_(torch.relu(x))  # a change whatever out holds (tracing runs it on the inputs too)
    return (x + 1.0,)


@pytest.mark.slow  # runs its file in a fresh process; the one-relu test above does so by default
def test_what_a_graph_writes_into_its_inputs_is_judged_compactly(tmp_path: Path) -> None:
    """The only wrong value is the one written into ``out``: the file judges it after the outputs."""
    path = minified(tmp_path, writes_relu_into, [torch.randn(8), torch.zeros(8)])

    assert FULL_FORM not in path.read_text()
    done = run(path)
    assert done.returncode == 1, done
    assert [line.split(": ")[1][:14] for line in done.stdout.splitlines()[:2]] == [
        "allclose",
        "fp64 rmse FAIL",
    ], done


@pytest.mark.slow  # runs its file in a fresh process; the one-relu test above does so by default
def test_an_input_with_gaps_and_an_offset_keeps_its_layout_in_the_compact_file(
    tmp_path: Path,
) -> None:
    strided = torch.randn(8, 20)[:, 1:17:2]
    path = minified(tmp_path, one_relu, [strided])

    assert FULL_FORM not in path.read_text()
    loaded = load_case(path).inputs[0]
    assert (loaded.stride(), loaded.storage_offset()) == ((20, 2), 1)
    assert torch.equal(loaded, strided)
    assert run(path).returncode == 1


@pytest.mark.slow  # runs its file in a fresh process; the one-relu test above does so by default
def test_an_expanded_input_keeps_its_broadcast_strides_in_the_compact_file(tmp_path: Path) -> None:
    gradient = torch.linspace(-1, 1, 8).expand(8, 8)
    path = minified(tmp_path, lambda x: (torch.relu(x) + x.sum(0),), [gradient])
    text = path.read_text()

    assert FULL_FORM not in text
    loaded = load_case(path).inputs[0]
    assert (loaded.shape, loaded.stride(), loaded.storage_offset()) == ((8, 8), (0, 1), 0)
    assert torch.equal(loaded, gradient)
    reproduced = run(path)
    assert (reproduced.returncode, reproduced.stdout.splitlines()[-1]) == (1, "REPRODUCED"), (
        reproduced
    )


def test_a_compact_file_whose_references_differ_from_the_plugins_is_found_out(
    tmp_path: Path,
) -> None:
    inputs = [torch.randn(8)]
    case = ReproCase(
        make_fx(one_relu)(*inputs),
        inputs,
        FailureKind.ACCURACY,
        "t",
        config_source=RELU_BUG.format("accuracy"),
    )
    path = write_minified(case, tmp_path / MINIFIED_NAME)
    assert compact_disagreement(load_repro(path).module, case) is None

    path.write_text(
        path.read_text().replace(
            "run(lambda args: gm(*args), inputs)",
            "run(lambda args: gm(*args), inputs, torch.float16)",
        )
    )
    assert (
        compact_disagreement(load_repro(path).module, case)
        == "its eager run gives other values than the plugin's"
    )


def test_a_compact_file_that_cannot_run_never_exits_as_reproduced(tmp_path: Path) -> None:
    path = minified(tmp_path, one_relu, [torch.randn(8)])
    path.write_text(
        path.read_text().replace(
            RELU_BUG.format("accuracy"), "torch._inductor.config.no_such_knob_in_any_torch = 1"
        )
    )

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


def relu_times(x: torch.Tensor, w: torch.Tensor) -> tuple[torch.Tensor]:
    return (torch.relu(x) * w,)


def test_a_torch_level_graph_of_a_training_call_is_compact_and_judges_its_gradients(
    tmp_path: Path,
) -> None:
    """Compiled through the whole stack, as the plugin judges it: outputs, then the gradients of
    their sum by each input that requires grad."""
    inputs = [torch.randn(16, requires_grad=True), torch.randn(16)]
    case = ReproCase(
        torch.fx.symbolic_trace(relu_times),
        inputs,
        FailureKind.ACCURACY,
        "t",
        level=DYNAMO,
        config_source=RELU_BUG.format("accuracy"),
        grad_enabled=True,
    )

    path = write_minified(case, tmp_path / MINIFIED_NAME)

    source = path.read_text()
    assert FULL_FORM not in source
    assert "compile_whole_stack))" in source and ".requires_grad_()" in source
    done = run(path)
    assert done.returncode == 1, done
    assert [line.split(" ")[0] for line in done.stdout.splitlines()] == [
        "out[0]",
        "out[1]",
        "REPRODUCED",
    ], done
    assert load_case(path).inputs[0].requires_grad


def test_a_training_graph_with_gradients_through_a_nan_keeps_the_full_form(
    tmp_path: Path,
) -> None:
    """The compact file judges every gradient element: one that depends on a NaN is no value
    (eager's kernels give it by where it falls), which only the full form leaves out."""
    x = torch.randn(16)
    x[3] = math.nan
    case = ReproCase(
        torch.fx.symbolic_trace(relu_times),
        [x.requires_grad_(), torch.randn(16)],
        FailureKind.ACCURACY,
        "t",
        level=DYNAMO,
        config_source=RELU_BUG.format("accuracy"),
        grad_enabled=True,
    )
    source = write_minified(case, tmp_path / MINIFIED_NAME).read_text()
    note = next(line for line in source.splitlines() if line.startswith(FULL_FORM))
    assert "gradients through a NaN" in note


def assigns_relu_into(x: torch.Tensor, out: torch.Tensor) -> torch.fx.GraphModule:
    """A torch-level graph as Dynamo writes one: ``out[:] = relu(x); out += 1; return (out * 2,)``."""
    graph = torch.fx.Graph()
    x_node, out_node = graph.placeholder("x"), graph.placeholder("out")
    relu = graph.call_function(torch.relu, (x_node,))
    graph.call_function(operator.setitem, (out_node, slice(None), relu))
    added = graph.call_function(operator.iadd, (out_node, 1.0))
    graph.output((graph.call_function(operator.mul, (added, 2)),))
    return torch.fx.GraphModule(torch.nn.Module(), graph)


def test_item_assignment_and_in_place_operators_of_a_torch_level_graph_stay_in_the_compact_file(
    tmp_path: Path,
) -> None:
    inputs = [torch.randn(16), torch.zeros(16)]
    case = ReproCase(
        assigns_relu_into(*inputs),
        inputs,
        FailureKind.ACCURACY,
        "t",
        level=DYNAMO,
        config_source=RELU_BUG.format("accuracy"),
    )

    path = write_minified(case, tmp_path / MINIFIED_NAME)

    assert FULL_FORM not in path.read_text()
    assert [
        node.target for node in load_case(path).gm.graph.nodes if node.op == "call_function"
    ] == [torch.relu, operator.setitem, operator.iadd, operator.mul]
    done = run(path)
    assert done.returncode == 1, done


def compact_cases() -> list[ReproCase]:
    """A case of each variant a compact file takes: an accuracy and an error check, a post-AOT
    graph with outputs marked visible, a broadcast input, a factory op, a torch-level graph in
    training and one that adds into its input."""
    x = torch.randn(8)
    marked = make_fx(one_relu)(x)
    marked.graph.find_nodes(op="output")[0].meta[VISIBLE_OUTPUTS_KEY] = [0]
    inputs = [torch.randn(8), torch.zeros(8)]
    return [
        ReproCase(
            make_fx(one_relu)(x),
            [x],
            FailureKind.ACCURACY,
            "t::relu",
            config_source=RELU_BUG.format("accuracy"),
        ),
        ReproCase(
            make_fx(one_relu)(x),
            [x],
            FailureKind.COMPILE_ERROR,
            "t::error",
            expected_error="RuntimeError: boom",
        ),
        ReproCase(marked, [x], FailureKind.ACCURACY, "t::visible"),
        ReproCase(
            make_fx(one_relu)(x.expand(4, 8)),
            [torch.randn(8).expand(4, 8)],
            FailureKind.ACCURACY,
            "t::broadcast",
        ),
        relu_plus_a_made_constant(),
        ReproCase(
            torch.fx.symbolic_trace(relu_times),
            [torch.randn(16, requires_grad=True), torch.randn(16)],
            FailureKind.ACCURACY,
            "t::training",
            level=DYNAMO,
            grad_enabled=True,
        ),
        ReproCase(adds_relu_into(), inputs, FailureKind.ACCURACY, "t::in_place", level=DYNAMO),
    ]


def adds_relu_into() -> torch.fx.GraphModule:
    """A torch-level graph as Dynamo writes one: ``out += relu(x); return (out * 2,)``. (fx writes
    an item assignment's node as a name it never reads, which pyflakes would report.)"""
    graph = torch.fx.Graph()
    x_node, out_node = graph.placeholder("x"), graph.placeholder("out")
    added = graph.call_function(
        operator.iadd, (out_node, graph.call_function(torch.relu, (x_node,)))
    )
    graph.output((graph.call_function(operator.mul, (added, 2)),))
    return torch.fx.GraphModule(torch.nn.Module(), graph)


@pytest.mark.parametrize("case", compact_cases(), ids=lambda case: case.title)
def test_a_compact_file_is_clean_to_pyflakes_and_defines_no_name_twice(case: ReproCase) -> None:
    assert compact_obstacle(case) is None
    source, _ = render_repro(case, compact=True)

    assert pyflakes_messages(source, MINIFIED_NAME) == []
    assert names_defined_twice(source) == []
    assert DECLARED_FOR_COMPACT and set(top_level_names(ast.parse(source))) >= DECLARED_FOR_COMPACT


def test_the_compact_code_marks_visible_outputs_under_the_key_inductor_reads() -> None:
    assert f'meta["{VISIBLE_OUTPUTS_KEY}"] = VISIBLE_OUTPUTS' in read_module(COMPACT)


def to_float8(x: torch.Tensor) -> tuple[torch.Tensor]:
    return ((x * 2).to(torch.float8_e5m2),)


def to_complex(x: torch.Tensor) -> tuple[torch.Tensor]:
    return (torch.complex(x.sin(), x.cos()),)


def _checked(path: Path, outputs: Callable[[list[torch.Tensor]], list[torch.Tensor]]) -> int:
    """The exit status of the compact file's check, its compiled graph standing in for by
    ``outputs`` of eager's."""
    module = load_repro(path).module
    return int(
        module.check_accuracy(
            torch.fx.symbolic_trace, lambda gm, inputs: lambda args: outputs(list(gm(*args)))
        )
    )


@pytest.mark.parametrize(
    ("fn", "rounded", "wrong"),
    [
        (
            to_float8,
            lambda outputs: outputs,
            lambda outputs: [(o.float() * 2).to(o.dtype) for o in outputs],
        ),
        (
            to_complex,
            lambda outputs: [o * (1 + 1e-6) for o in outputs],
            lambda outputs: [o.conj() for o in outputs],
        ),
    ],
    ids=["float8", "complex"],
)
def test_a_compact_file_judges_float8_and_complex_outputs_by_the_plugins_rule(
    tmp_path: Path,
    fn: Callable[..., Any],
    rounded: Callable[[list[torch.Tensor]], list[torch.Tensor]],
    wrong: Callable[[list[torch.Tensor]], list[torch.Tensor]],
) -> None:
    """Its check calls the rule's ``leaf_verdict`` on the outputs as they are: a float8 output
    (no kernels for the rule's arithmetic) crashed it, and a complex one (no floating dtype) was
    held to exact equality, so that a compiled rounding of its values read as reproduced."""
    path = minified(tmp_path, fn, [torch.linspace(-2, 2, 16)], config="")
    assert FULL_FORM not in path.read_text()
    assert _checked(path, rounded) == 0
    assert _checked(path, wrong) == 1
