"""Stage attribution and root-cause grouping: mutants of Inductor's codegen, lowerings and
decompositions, each attributed to its stage, and failures sharing a signature grouped."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.fx
from torch.fx.experimental.proxy_tensor import make_fx

from pytest_torchcompile.common.allowed import SETUP_ENV
from pytest_torchcompile.common.kinds import FailureKind
from pytest_torchcompile.common.results import CaseResult, MinifyResult, StopReason
from pytest_torchcompile.common.verdict import Status
from pytest_torchcompile.judging import stages
from pytest_torchcompile.judging.case import ReproCase
from pytest_torchcompile.minifying.repro_file import minify_repro
from pytest_torchcompile.reporting.github import github_summary_markdown
from pytest_torchcompile.reporting.grouping import root_cause_lines, root_causes
from pytest_torchcompile.repros.repro import write_repro
from pytest_torchcompile.torch_internals.config import inductor_config

aten = torch.ops.aten
RELU_BUG = "torch._inductor.config.cpp.inject_relu_bug_TESTING_ONLY = 'accuracy'"

ABS_LOWERING_MUTANT = """
import torch
from torch._inductor import lowering

aten = torch.ops.aten
# abs lowered as neg: wrong IR for every input, whatever code is generated from it
lowering.lowerings[aten.abs.default] = lowering.lowerings[aten.neg.default]
"""


def sin_op_exp(op: Any) -> Any:
    def fn(x: torch.Tensor) -> tuple[torch.Tensor]:
        return (torch.exp(op(torch.sin(x) * 2)),)

    return fn


def write_case(fn: Any, inputs: list[Any], directory: Path, **fields: Any) -> Path:
    case = ReproCase(make_fx(fn)(*inputs), inputs, FailureKind.ACCURACY, fn.__name__, **fields)
    return write_repro(case, directory / "repro.py")


# --- post-AOT graphs (what repros hold) ---------------------------------------------------------


@pytest.mark.slow
def test_the_relu_codegen_knob_is_attributed_to_cpp_codegen(tmp_path: Path) -> None:
    repro = write_case(sin_op_exp(torch.relu), [torch.randn(64)], tmp_path, config_source=RELU_BUG)

    result = minify_repro(repro)

    assert result.stage == "inductor.codegen.cpp" and result.ops == ["aten.relu"]
    assert result.stage_summary == (
        "deviation appears in Inductor's C++ codegen of aten.relu "
        "(cpp.inject_relu_bug_TESTING_ONLY='accuracy')"
    )
    assert result.failure_type == FailureKind.ACCURACY and result.stage_compiles >= 3
    assert f"# stage:   {result.stage_summary}" in Path(result.path or "").read_text()
    assert result.summary_line("t").splitlines()[1].startswith(f"  {result.stage_summary} (")


@pytest.mark.slow
def test_a_lowering_mutant_installed_by_the_setup_hook_is_attributed_to_the_lowering(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    setup = tmp_path / "abs_mutant.py"
    setup.write_text(ABS_LOWERING_MUTANT)
    monkeypatch.setenv(SETUP_ENV, str(setup))
    repro = write_case(sin_op_exp(torch.abs), [torch.randn(64)], tmp_path)

    result = minify_repro(repro)  # the judging child imports the mutant; this process has none

    assert result.ops_after == 1 and result.ops == ["aten.abs"]
    assert result.stage == "inductor.lowering"
    assert result.stage_summary == "deviation appears in Inductor's lowering of aten.abs"


def test_without_the_setup_hook_the_lowering_mutant_does_not_reproduce(tmp_path: Path) -> None:
    repro = write_case(sin_op_exp(torch.abs), [torch.randn(16)], tmp_path)

    result = minify_repro(repro, isolate=False)

    assert result.stage is None and result.stop is StopReason.NOT_REPRODUCED


def test_a_setup_module_that_fails_to_import_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(SETUP_ENV, "no_such_setup_module_anywhere")
    repro = write_case(sin_op_exp(torch.relu), [torch.randn(16)], tmp_path, config_source=RELU_BUG)

    result = minify_repro(repro)

    assert result.stop is StopReason.CRASHED and "no_such_setup_module_anywhere" in result.note


@pytest.mark.slow
def test_compile_errors_name_the_error_not_a_deviation() -> None:
    x = torch.randn(16)
    gm = make_fx(lambda x: (torch.relu(x),))(x)
    config = {"cpp.inject_relu_bug_TESTING_ONLY": "compile_error"}
    failure = stages.ExpectedFailure(FailureKind.COMPILE_ERROR)
    with inductor_config(config):
        found = stages.attribute_stage(gm, [x], stages.POST_AOT, 1e-4, failure, config=config)

    assert found.stage == "inductor.codegen.cpp"
    assert found.summary.startswith("the error appears in Inductor's C++ codegen of aten.relu")


@pytest.mark.cuda
def test_the_relu_codegen_knob_on_a_gpu_is_attributed_to_triton_codegen() -> None:
    x = torch.randn(64, device="cuda")
    gm = make_fx(lambda x: (torch.relu(x.sin()) * 2,))(x)
    config = {"triton.inject_relu_bug_TESTING_ONLY": "accuracy"}

    with inductor_config(config):
        found = stages.attribute_stage(gm, [x], stages.POST_AOT, 1e-4, config=config)

    assert found.stage == "inductor.codegen.triton"
    assert found.summary == (
        "deviation appears in Inductor's Triton codegen of aten.relu "
        "(triton.inject_relu_bug_TESTING_ONLY='accuracy')"
    )


def break_relu(graph: torch.fx.Graph) -> None:
    """A post-grad pass that miscompiles: every relu becomes a neg."""
    for node in graph.nodes:
        if node.target is aten.relu.default:
            node.target = aten.neg.default


@pytest.mark.slow
def test_a_graph_pass_mutant_is_attributed_to_the_pass_by_name() -> None:
    x = torch.randn(64)
    gm = make_fx(lambda x: (torch.relu(x.sin()) * 2,))(x)
    config = {"post_grad_custom_post_pass": break_relu}
    with inductor_config(config):
        found = stages.attribute_stage(gm, [x], stages.POST_AOT, 1e-4, config=config)

    assert found.stage == "inductor.post_grad_passes" and found.culprits == [
        "post_grad_custom_post_pass"
    ]
    assert (
        found.summary
        == "deviation appears in Inductor's post-grad passes: post_grad_custom_post_pass"
    )
    assert found.compiles <= 8, "the passes are bisected, not tried one by one"


# --- torch-level (Dynamo) graphs ---------------------------------------------------------------


@pytest.fixture
def relu_breaking_noop_removal(monkeypatch: pytest.MonkeyPatch) -> None:
    """Inductor's ``remove_noop_ops``, which runs in the joint-graph passes and again in the
    post-grad ones, turning each relu into a neg as well: skipping either subsystem leaves the
    other breaking it."""
    from torch._inductor.fx_passes import post_grad

    original = post_grad.remove_noop_ops

    def remove_noop_ops(graph: torch.fx.Graph) -> None:
        original(graph)
        break_relu(graph)

    monkeypatch.setattr(post_grad, "remove_noop_ops", remove_noop_ops)


def relu_sin(x: torch.Tensor) -> tuple[torch.Tensor]:
    return (torch.relu(x.sin()) * 2,)


@pytest.mark.usefixtures("relu_breaking_noop_removal")
def test_a_pass_of_several_subsystems_is_attributed_to_the_pass_by_name() -> None:
    gm = torch.fx.symbolic_trace(relu_sin)

    found = stages.attribute_stage(gm, [torch.randn(64)], stages.DYNAMO, 1e-4)

    assert found.stage == "inductor.graph_pass" and found.culprits == ["remove_noop_ops"]
    assert found.summary == (
        "deviation appears in Inductor's graph pass remove_noop_ops "
        "(it goes with torch._inductor.config.disabled_passes = 'remove_noop_ops')"
    )
    assert "inductor without joint_graph_passes: fails" in found.trail
    assert "inductor without post_grad_passes: fails" in found.trail
    assert found.trail[-1] == "inductor with disabled_passes='remove_noop_ops': passes"


def test_a_lowering_bug_is_not_blamed_on_a_graph_pass() -> None:
    gm = torch.fx.symbolic_trace(relu_sin)
    with inductor_config({"cpp.inject_relu_bug_TESTING_ONLY": "accuracy"}):
        found = stages.attribute_stage(
            gm,
            [torch.randn(64)],
            stages.DYNAMO,
            1e-4,
            config={"cpp.inject_relu_bug_TESTING_ONLY": "accuracy"},
        )

    assert (
        found.stage == "inductor.codegen.cpp"
        and "inductor without its graph passes: fails" in found.trail
    )


@pytest.fixture
def wrong_layer_norm_decomposition() -> Iterator[None]:
    """Inductor's decomposition of native_layer_norm, shifted by 0.1 (the table Inductor and
    aot_eager_decomp_partition use; restored afterwards)."""
    from torch._inductor.decomposition import select_decomp_table

    table = select_decomp_table()
    op = aten.native_layer_norm.default
    original = table[op]

    def shifted(*args: Any, **kwargs: Any) -> Any:
        out, mean, rstd = original(*args, **kwargs)
        return out + 0.1, mean, rstd

    table[op] = shifted
    try:
        yield
    finally:
        table[op] = original


def layer_norm_relu(
    x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor
) -> tuple[torch.Tensor]:
    return (torch.relu(torch.nn.functional.layer_norm(x, (16,), weight, bias)) * 2,)


@pytest.mark.slow
@pytest.mark.usefixtures("wrong_layer_norm_decomposition")
def test_a_decomposition_mutant_is_attributed_to_decompositions_naming_the_op() -> None:
    gm = torch.fx.symbolic_trace(layer_norm_relu)
    inputs = [torch.randn(4, 16), torch.randn(16), torch.randn(16)]

    found = stages.attribute_stage(gm, inputs, stages.DYNAMO, 1e-4)

    assert found.stage == "decompositions" and found.culprits == ["aten.native_layer_norm"]
    assert found.summary == "deviation appears with decompositions: aten.native_layer_norm"
    assert found.trail[:3] == [
        "eager: passes",
        "aot_eager: passes",
        "aot_eager_decomp_partition: fails",
    ]


def test_a_torch_level_graph_that_compiles_correctly_is_unreproduced() -> None:
    gm = torch.fx.symbolic_trace(layer_norm_relu)

    found = stages.attribute_stage(
        gm, [torch.randn(4, 16), torch.randn(16), torch.randn(16)], stages.DYNAMO, 1e-4
    )

    assert found.stage == "unreproduced" and found.level == stages.DYNAMO


@pytest.fixture
def wrong_tanh_backward_decomposition() -> Iterator[None]:
    """Inductor's decomposition of tanh's backward, shifted by 0.1: forward values stay right."""
    from torch._inductor.decomposition import select_decomp_table

    table = select_decomp_table()
    op = aten.tanh_backward.default
    original = table[op]
    table[op] = lambda *args, **kwargs: original(*args, **kwargs) + 0.1
    try:
        yield
    finally:
        table[op] = original


def doubled_tanh(x: torch.Tensor) -> tuple[torch.Tensor]:
    return (torch.tanh(x) * 2,)


@pytest.mark.usefixtures("wrong_tanh_backward_decomposition")
def test_a_torch_level_graph_of_a_training_call_is_attributed_on_its_gradients() -> None:
    """A failure only the gradients show (as pytorch/pytorch#197888's): stage runs that judged
    the forward alone found every stage passing and called the minimal graph unreproduced, while
    the minifier, judging gradients too, had kept it."""
    gm = torch.fx.symbolic_trace(doubled_tanh)

    found = stages.attribute_stage(gm, [torch.randn(64, requires_grad=True)], stages.DYNAMO, 1e-4)

    assert found.stage == "decompositions" and found.culprits == ["aten.tanh_backward"], found.trail
    assert found.trail[:3] == [
        "eager: passes",
        "aot_eager: passes",
        "aot_eager_decomp_partition: fails",
    ]


def test_an_unknown_level_is_refused() -> None:
    gm = torch.fx.symbolic_trace(layer_norm_relu)
    with pytest.raises(ValueError, match="unknown graph level 'aten'"):
        stages.attribute_stage(gm, [], "aten", 1e-4)


def test_graph_ops_name_aten_and_torch_level_ops() -> None:
    assert stages.graph_ops(torch.fx.symbolic_trace(layer_norm_relu)) == [
        "torch.nn.functional.layer_norm",
        "torch.relu",
        "operator.mul",
    ]
    x = torch.randn(4)
    assert stages.graph_ops(make_fx(lambda x: (torch.relu(x).sin(),))(x)) == [
        "aten.relu",
        "aten.sin",
    ]


def test_failure_type_is_the_exception_type_of_an_error() -> None:
    assert stages.ExpectedFailure(FailureKind.ACCURACY).type_name == "accuracy"
    assert (
        stages.ExpectedFailure(
            FailureKind.COMPILE_ERROR, "CppCompileError: C++ compile error"
        ).type_name
        == "CppCompileError"
    )


# --- grouping ----------------------------------------------------------------------------------


def failed(
    nodeid: str, ops: list[str], stage: str, summary: str, kind: str = "accuracy"
) -> CaseResult:
    minify = MinifyResult(
        3,
        len(ops),
        1.0,
        3,
        StopReason.MINIMAL,
        path=f"{nodeid}/minified.py",
        ops=ops,
        stage=stage,
        stage_summary=summary,
        failure_type=kind,
    )
    return CaseResult(nodeid, Status.FAIL_ACCURACY, minify=minify)


def test_failures_sharing_a_signature_are_one_root_cause_listing_their_tests() -> None:
    codegen = ("inductor.codegen.cpp", "deviation appears in Inductor's C++ codegen of aten.relu")
    results = [
        failed("t.py::test_b", ["aten.relu"], *codegen),
        failed(
            "t.py::test_c",
            ["aten.abs"],
            "inductor.lowering",
            "deviation appears in Inductor's lowering of aten.abs",
        ),
        failed("t.py::test_a", ["aten.relu"], *codegen),
        failed("t.py::test_d", ["aten.relu"], *codegen, kind="CppCompileError"),
        CaseResult("t.py::test_e", Status.PASS),
        CaseResult(
            "t.py::test_f",
            Status.FAIL_ACCURACY,
            minify=MinifyResult(3, 3, 1.0, 3, StopReason.NOT_REPRODUCED),
        ),
    ]

    groups = root_causes(results)

    assert [group.tests for group in groups] == [
        ["t.py::test_a", "t.py::test_b"],
        ["t.py::test_c"],
        ["t.py::test_d"],
    ]
    assert root_cause_lines(results)[:4] == [
        "compile accuracy root causes: 3",
        "  [2 tests] deviation appears in Inductor's C++ codegen of aten.relu | ops: aten.relu | accuracy",
        "      t.py::test_a",
        "      t.py::test_b",
    ]
    assert root_cause_lines([CaseResult("t.py::test_e", Status.PASS)]) == []


def test_the_github_summary_names_each_root_cause_most_tests_first() -> None:
    codegen = ("inductor.codegen.cpp", "deviation appears in Inductor's C++ codegen of aten.relu")
    results = [
        failed(
            "t.py::test_c",
            ["aten.abs"],
            "inductor.lowering",
            "deviation appears in Inductor's lowering of aten.abs",
        ),
        failed("t.py::test_a", ["aten.relu"], *codegen),
        failed("t.py::test_b", ["aten.relu"], *codegen),
        CaseResult("t.py::test_e", Status.PASS),
    ]

    lines = github_summary_markdown(results, None).splitlines()

    start = lines.index("**Root causes:** 2")
    assert lines[start + 1 : start + 3] == [
        "- deviation appears in Inductor's C++ codegen of aten.relu (ops `aten.relu`, accuracy): 2 tests",
        "- deviation appears in Inductor's lowering of aten.abs (ops `aten.abs`, accuracy): 1 test",
    ]
    assert "Root causes" not in github_summary_markdown(results[3:], None)


def test_a_minify_result_with_its_stage_survives_the_trip_to_the_controller() -> None:
    result = failed("t.py::test_a", ["aten.relu"], "inductor.codegen.cpp", "in C++ codegen")
    assert CaseResult.from_dict(json.loads(json.dumps(result.to_dict()))) == result


def test_a_node_inductor_made_is_named_as_its_op_and_what_it_was_made_of() -> None:
    gm = make_fx(lambda x, src: (torch.diagonal_scatter(x, src),))(torch.zeros(8, 8), torch.ones(8))

    assert stages.lowered_op("diagonal_scatter", gm) == "aten.diagonal_scatter"
    assert (
        stages.lowered_op("copy__default", gm)
        == "copy_ (a node Inductor made of aten.diagonal_scatter)"
    )
    assert (
        stages.lowered_op("copy__default_1", gm)
        == "copy_ (a node Inductor made of aten.diagonal_scatter)"
    )


@pytest.fixture
def abs_and_cos_lowered_wrong() -> Iterator[None]:
    """abs lowered as neg and cos as sin (Inductor's lowering table; restored afterwards): each
    op deviates on its own, so that no one op's fallback to aten cures the graph."""
    from torch._inductor import lowering

    originals = {op: lowering.lowerings[op] for op in (aten.abs.default, aten.cos.default)}
    lowering.lowerings[aten.abs.default] = lowering.lowerings[aten.neg.default]
    lowering.lowerings[aten.cos.default] = lowering.lowerings[aten.sin.default]
    try:
        yield
    finally:
        lowering.lowerings.update(originals)


def abs_plus_cos(x: torch.Tensor) -> tuple[torch.Tensor]:
    return (torch.abs(x) * 2 + torch.cos(x),)


@pytest.mark.usefixtures("abs_and_cos_lowered_wrong")
def test_no_op_is_named_where_no_one_fallback_alone_cures() -> None:
    """Two ops lowered wrong: all lowerings falling back cures the graph, neither one's alone
    does, so the stage says what was shown and names no op."""
    gm = make_fx(abs_plus_cos)(torch.randn(8))

    found = stages.attribute_stage(gm, [torch.randn(8)], stages.POST_AOT, 1e-4)

    assert found.stage == "inductor.lowering" and found.culprits == [], found.trail
    assert "no one op's alone is shown at fault" in found.summary
    assert any(line.endswith("alone: fails") for line in found.trail), found.trail
