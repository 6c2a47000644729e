"""The minifier: candidate slicing, the search, and repro files end to end.

Fake judges (a verdict from the ops a candidate keeps, no compiling) test the search fast; the
end-to-end cases compile for real with Inductor's injected bugs and cost about a second a compile.
"""

from __future__ import annotations

import itertools
import operator
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.fx
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from torch.fx.experimental.proxy_tensor import make_fx

from pytest_torchcompile.common.kinds import FailureKind
from pytest_torchcompile.common.leaves import LeafResult
from pytest_torchcompile.common.results import MinifyProgress, StopReason
from pytest_torchcompile.judging.case import ReproCase
from pytest_torchcompile.judging.isolation.parent import InProcessJudge
from pytest_torchcompile.judging.isolation.protocol import JudgeSettings
from pytest_torchcompile.judging.judge import GraphVerdict, judge_graph
from pytest_torchcompile.minifying.repro_file import minify_in_fresh_process, minify_repro
from pytest_torchcompile.minifying.search import GraphSlicer, minify_graph
from pytest_torchcompile.repros.loading import load_case, repro_defect
from pytest_torchcompile.repros.repro import write_repro
from pytest_torchcompile.torch_internals.config import inductor_config, inductor_config_diff

aten = torch.ops.aten
RELU_BUG = "torch._inductor.config.cpp.inject_relu_bug_TESTING_ONLY = {!r}"
LOG1P_BUG = "torch._inductor.config.cpp.inject_log1p_bug_TESTING_ONLY = 'accuracy'"


def aten_case(
    fn: Callable[..., Any], inputs: list[Any], kind: str = FailureKind.ACCURACY, **fields: Any
) -> ReproCase:
    """A case whose graph is ``fn`` traced to aten ops, as Inductor receives it."""
    return ReproCase(
        make_fx(fn)(*inputs), inputs, kind, getattr(fn, "__name__", type(fn).__name__), **fields
    )


def ops_of(gm: torch.fx.GraphModule) -> list[torch.fx.Node]:
    return [node for node in gm.graph.nodes if node.op == "call_function"]


def targets_of(gm: torch.fx.GraphModule) -> list[Any]:
    return [node.target for node in ops_of(gm)]


def failing_with(
    *targets: Any, kind: str = FailureKind.ACCURACY, error: str | None = None
) -> Callable[..., GraphVerdict]:
    """A fake judge: the candidate fails iff it keeps all of ``targets``. It runs the candidate
    eagerly first, so a malformed cut fails the test instead of passing unnoticed."""

    def judge(gm: torch.fx.GraphModule, inputs: list[Any]) -> GraphVerdict:
        gm(*inputs)
        return (
            GraphVerdict(kind, error=error)
            if set(targets) <= set(targets_of(gm))
            else GraphVerdict(None)
        )

    return judge


def sin_relu_cos(
    sines: int = 20, cosines: int = 4
) -> Callable[[torch.Tensor], tuple[torch.Tensor]]:
    """A chain: ``sines`` sins, a relu, ``cosines`` coss."""

    def sin_relu_cos(x: torch.Tensor) -> tuple[torch.Tensor]:
        for _ in range(sines):
            x = torch.sin(x)
        x = torch.relu(x)
        for _ in range(cosines):
            x = torch.cos(x)
        return (x,)

    return sin_relu_cos


def only_op(path: Path) -> torch.fx.Node:
    (op,) = ops_of(load_case(path).gm)
    return op


# --- slicing -------------------------------------------------------------------------------------


def test_slice_feeds_cut_edges_with_real_values_and_drops_the_rest() -> None:
    def graph(x: torch.Tensor, unused: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor]:
        return (torch.relu(torch.sin(x) + torch.cos(y)),)

    inputs = [torch.randn(5), torch.randn(5), torch.randn(5)]
    slicer = GraphSlicer(make_fx(graph)(*inputs), inputs)
    relu = next(unit for unit in slicer.order if slicer.units[unit][0].target is aten.relu.default)
    gm, fed = slicer.slice(frozenset({relu}))

    assert [node.op for node in gm.graph.nodes] == ["placeholder", "call_function", "output"]
    torch.testing.assert_close(fed[0], torch.sin(inputs[0]) + torch.cos(inputs[2]))
    torch.testing.assert_close(gm(*fed)[0], torch.relu(fed[0]))


def test_slice_returns_values_nothing_inside_consumes() -> None:
    def graph(x: torch.Tensor) -> tuple[torch.Tensor]:
        a = torch.sin(x)
        return (torch.cos(a) * torch.exp(a),)

    inputs = [torch.randn(5)]
    slicer = GraphSlicer(make_fx(graph)(*inputs), inputs)
    by_target = {slicer.units[unit][0].target: unit for unit in slicer.order}
    gm, fed = slicer.slice(frozenset({by_target[aten.sin.default], by_target[aten.cos.default]}))

    outputs = gm(*fed)
    assert len(fed) == 1 and len(outputs) == 1  # sin feeds cos inside: only cos comes out
    torch.testing.assert_close(outputs[0], torch.cos(torch.sin(inputs[0])))


def test_tuple_results_stay_with_their_getitems() -> None:
    def graph(x: torch.Tensor) -> tuple[torch.Tensor]:
        values, indices = torch.sort(x)
        return (torch.relu(values) + indices.float(),)

    inputs = [torch.randn(6)]
    slicer = GraphSlicer(make_fx(graph)(*inputs), inputs)
    sort_unit = next(
        unit for unit in slicer.order if slicer.units[unit][0].target is aten.sort.default
    )

    assert [node.target for node in slicer.units[sort_unit]] == [
        aten.sort.default,
        operator.getitem,
        operator.getitem,
    ]
    gm, fed = slicer.slice(frozenset({sort_unit}))
    assert len(gm(*fed)) == 2


# --- the search, with fake judges ----------------------------------------------------------------


def test_fusion_bug_keeps_both_ops_with_fake_judge() -> None:
    case = aten_case(
        lambda x: (torch.exp(torch.cos(torch.sin(torch.neg(x)))).tanh(),), [torch.randn(8)]
    )

    reduction = minify_graph(case, failing_with(aten.sin.default, aten.cos.default))

    assert reduction.gm is not None and reduction.stop is StopReason.MINIMAL
    assert sorted(map(str, targets_of(reduction.gm))) == ["aten.cos.default", "aten.sin.default"]
    assert reduction.needs == (
        "each op is needed, its value fed in instead: without aten.sin (sin) it passes; "
        "without aten.cos (cos) it passes"
    )


def test_a_single_culprit_needs_no_reasons() -> None:
    case = aten_case(sin_relu_cos(2, 2), [torch.randn(8)])

    reduction = minify_graph(case, failing_with(aten.relu.default))

    assert reduction.ops_after == 1 and reduction.needs == ""


def test_each_op_of_a_minimal_error_says_what_it_did_without_it() -> None:
    """Without the sin, the rest still raises, but another error: an op that shapes the failure."""
    case = aten_case(
        lambda x: (torch.cos(torch.sin(x)),),
        [torch.randn(8)],
        kind=FailureKind.COMPILE_ERROR,
        expected_error="InductorError: A",
    )

    def judge(gm: torch.fx.GraphModule, inputs: list[Any]) -> GraphVerdict:
        gm(*inputs)
        targets = set(targets_of(gm))
        if aten.cos.default not in targets:
            return GraphVerdict(None)
        return GraphVerdict(
            FailureKind.COMPILE_ERROR,
            error="InductorError: A" if aten.sin.default in targets else "InductorError: B",
        )

    reduction = minify_graph(case, judge)

    assert reduction.ops_after == 2
    assert reduction.needs.endswith(
        "without aten.sin (sin) it fails otherwise (compile_error: InductorError: B); "
        "without aten.cos (cos) it passes"
    ), reduction.needs


def test_compile_errors_are_bisected_in_log_n_compiles() -> None:
    def chain(x: torch.Tensor) -> tuple[torch.Tensor]:
        for index in range(64):
            x = torch.relu(x) if index == 50 else torch.sin(x)
        return (x,)

    error = "InductorError: injected"
    case = aten_case(chain, [torch.randn(4)], FailureKind.COMPILE_ERROR, expected_error=error)

    reduction = minify_graph(
        case, failing_with(aten.relu.default, kind=FailureKind.COMPILE_ERROR, error=error)
    )

    assert reduction.gm is not None and targets_of(reduction.gm) == [aten.relu.default]
    assert reduction.compiles <= 1 + 6 + 1  # whole graph, log2(64) prefixes, the culprit alone


def test_a_different_error_is_not_the_failure() -> None:
    case = aten_case(
        sin_relu_cos(3, 3),
        [torch.randn(4)],
        FailureKind.COMPILE_ERROR,
        expected_error="InductorError: A",
    )

    reduction = minify_graph(
        case,
        failing_with(aten.relu.default, kind=FailureKind.COMPILE_ERROR, error="InductorError: B"),
    )

    assert reduction.gm is None and "fails differently" in reduction.how


def test_budget_returns_the_smallest_failing_graph_labelled_not_minimal() -> None:
    case = aten_case(sin_relu_cos(), [torch.randn(4)])
    judge = failing_with(aten.relu.default)

    reduction = minify_graph(case, judge, budget_s=0.0)

    assert reduction.gm is not None and reduction.stop is StopReason.TIME_BUDGET
    assert "time budget" in reduction.how
    assert judge(reduction.gm, reduction.inputs).failure == FailureKind.ACCURACY


def test_progress_is_reported_after_every_candidate() -> None:
    seen: list[MinifyProgress] = []
    case = aten_case(sin_relu_cos(), [torch.randn(4)])

    reduction = minify_graph(case, failing_with(aten.relu.default), progress=seen.append)

    assert [update.compiles for update in seen] == list(range(1, reduction.compiles + 1))
    assert seen[0].case == "sin_relu_cos" and seen[-1].ops_left == 1
    assert all(earlier.ops_left >= later.ops_left for earlier, later in itertools.pairwise(seen))


UNARY = [aten.sin.default, aten.cos.default, aten.neg.default, aten.relu.default, aten.abs.default]
BINARY = [aten.add.Tensor, aten.mul.Tensor, aten.sub.Tensor]
BUG = aten.tanh.default


@st.composite
def dags_with_planted_bugs(draw: st.DrawFn) -> tuple[torch.fx.GraphModule, int]:
    """A random DAG of aten ops on two inputs; ``tanh`` marks the planted bug nodes."""
    graph = torch.fx.Graph()
    values = [graph.placeholder("x"), graph.placeholder("y")]
    size = draw(st.integers(3, 24))
    bugs = set(draw(st.lists(st.integers(0, size - 1), min_size=1, max_size=2, unique=True)))
    for index in range(size):
        if index in bugs:
            target, arity = BUG, 1
        elif draw(st.booleans()):
            target, arity = draw(st.sampled_from(UNARY)), 1
        else:
            target, arity = draw(st.sampled_from(BINARY)), 2
        args = tuple(draw(st.sampled_from(values)) for _ in range(arity))
        values.append(graph.call_function(target, args))
    dangling = [node for node in values[2:] if not node.users]
    graph.output(tuple(dangling))
    return torch.fx.GraphModule(torch.nn.Module(), graph), len(bugs)


@given(dags_with_planted_bugs(), st.sampled_from([FailureKind.ACCURACY, FailureKind.COMPILE_ERROR]))
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_random_graphs_reduce_to_exactly_the_planted_bug(
    planted: tuple[torch.fx.GraphModule, int], kind: str
) -> None:
    gm, bug_count = planted
    error = "InductorError: planted" if kind == FailureKind.COMPILE_ERROR else None

    def judge(candidate: torch.fx.GraphModule, inputs: list[Any]) -> GraphVerdict:
        candidate(*inputs)
        return (
            GraphVerdict(kind, error=error)
            if targets_of(candidate).count(BUG) >= bug_count
            else GraphVerdict(None)
        )

    inputs = [torch.randn(4), torch.randn(4)]
    case = ReproCase(gm, inputs, kind, "random", expected_error=error)
    reduction = minify_graph(case, judge)

    assert reduction.gm is not None and reduction.stop is StopReason.MINIMAL
    assert targets_of(reduction.gm) == [BUG] * bug_count
    result = GraphSlicer(reduction.gm, reduction.inputs)
    for unit in result.order:  # 1-minimal, checked on the result itself
        assert judge(*result.slice(frozenset(result.order) - {unit})).failure is None


@given(dags_with_planted_bugs())
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_random_graphs_keep_an_op_pair_that_only_fails_together(
    planted: tuple[torch.fx.GraphModule, int],
) -> None:
    gm, _ = planted

    def pair_fails(candidate: torch.fx.GraphModule, inputs: list[Any]) -> GraphVerdict:
        candidate(*inputs)
        fused = any(
            node.target is BUG and node.args[0].op == "call_function" for node in ops_of(candidate)
        )
        return GraphVerdict(FailureKind.ACCURACY if fused else None)

    inputs = [torch.randn(4), torch.randn(4)]
    case = ReproCase(gm, inputs, FailureKind.ACCURACY, "random")
    if pair_fails(gm, inputs).failure is None:
        return  # every planted bug reads a graph input: nothing fails
    reduction = minify_graph(case, pair_fails)

    assert reduction.gm is not None and reduction.stop is StopReason.MINIMAL
    producer, bug = ops_of(reduction.gm)
    assert bug.target is BUG and bug.args[0] is producer


# --- end to end, compiling for real --------------------------------------------------------------


def write_case(case: ReproCase, directory: Path) -> Path:
    return write_repro(case, directory / "repro.py")


@pytest.mark.slow
def test_sin_relu_cos_minifies_to_one_relu_of_a_graph_input(tmp_path: Path) -> None:
    repro = write_case(
        aten_case(sin_relu_cos(), [torch.randn(64)], config_source=RELU_BUG.format("accuracy")),
        tmp_path,
    )
    original = repro.read_bytes()

    result = minify_repro(repro)

    assert (result.ops_before, result.ops_after, result.stop) == (25, 1, StopReason.MINIMAL)
    assert result.compiles <= 4 and result.path == str(tmp_path / "minified.py")
    relu = only_op(Path(result.path))
    assert relu.target is aten.relu.default and relu.args[0].op == "placeholder"
    assert result.kernel_path is not None and "kernel" in Path(result.kernel_path).read_text()
    assert len(Path(result.path).read_text().splitlines()) <= 80, "the compact form"
    report = Path(result.bug_report_path or "").read_text()
    assert (
        report.startswith("# [inductor] wrong result from aten.relu on CPU")
        and "fp64 rmse FAIL" in report
    )
    assert Path(result.path).read_text().strip() in report, "the minified code, whole"
    assert repro.read_bytes() == original
    assert subprocess.run([sys.executable, result.path], capture_output=True).returncode == 1


@pytest.mark.slow
def test_a_fresh_process_minifies_as_this_one_would(tmp_path: Path) -> None:
    """What a process whose device a device-side error made unusable does instead."""
    repro = write_case(
        aten_case(sin_relu_cos(4, 2), [torch.randn(64)], config_source=RELU_BUG.format("accuracy")),
        tmp_path,
    )

    result = minify_in_fresh_process(repro, isolate=False)

    assert (result.ops_before, result.ops_after, result.stop) == (7, 1, StopReason.MINIMAL)
    assert (
        result.path == str(tmp_path / "minified.py")
        and only_op(Path(result.path)).target is aten.relu.default
    )


@pytest.mark.slow
def test_log1p_bug_behind_a_bool_mask_lands_on_the_relu(tmp_path: Path) -> None:
    def masked(x: torch.Tensor) -> tuple[torch.Tensor]:
        mask = torch.log1p(x) > 0
        return (torch.where(mask, torch.relu(x), x),)

    config = RELU_BUG.format("accuracy") + "\n" + LOG1P_BUG
    repro = write_case(aten_case(masked, [torch.randn(256)], config_source=config), tmp_path)

    result = minify_repro(repro, isolate=False)

    assert (
        result.ops_after == 1
        and only_op(repro.with_name("minified.py")).target is aten.relu.default
    )


def buggy_sin_cos_pass(graph: torch.fx.Graph) -> None:
    """A post-grad pass that miscompiles ``cos(sin(x))``: a bug only the two ops together show."""
    for node in list(graph.nodes):
        if (
            node.target is aten.cos.default
            and getattr(node.args[0], "target", None) is aten.sin.default
        ):
            with graph.inserting_after(node):
                wrong = graph.call_function(aten.add.Tensor, (node, 1.0))
            node.replace_all_uses_with(
                wrong, delete_user_cb=lambda user, wrong=wrong: user is not wrong
            )


@pytest.mark.slow
def test_fusion_bug_keeps_both_ops_end_to_end() -> None:
    case = aten_case(
        lambda x: (torch.exp(torch.cos(torch.sin(torch.neg(x)))).tanh(),), [torch.randn(32)]
    )

    with (
        InProcessJudge() as judge,
        inductor_config({"post_grad_custom_post_pass": buggy_sin_cos_pass}),
    ):
        reduction = minify_graph(case, lambda gm, inputs: judge(gm, inputs, JudgeSettings()))

    assert reduction.gm is not None and reduction.stop is StopReason.MINIMAL
    sin, cos = ops_of(reduction.gm)
    assert (sin.target, cos.target) == (aten.sin.default, aten.cos.default) and cos.args[0] is sin


def buggy_constant_mul_pass(graph: torch.fx.Graph) -> None:
    """A post-grad pass that miscompiles a product with a graph constant."""
    for node in list(graph.nodes):
        if node.target is aten.mul.Tensor and any(
            getattr(arg, "op", None) == "get_attr" for arg in node.args
        ):
            with graph.inserting_after(node):
                wrong = graph.call_function(aten.add.Tensor, (node, 1.0))
            node.replace_all_uses_with(
                wrong, delete_user_cb=lambda user, wrong=wrong: user is not wrong
            )


class WithConstant(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.constant = torch.linspace(-2, 2, 40)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor]:
        return (torch.sin(torch.relu(x) * self.constant),)


@pytest.mark.slow
def test_constants_survive_with_their_real_values(tmp_path: Path) -> None:
    # A config value naming a function, written the way a repro file can execute it.
    config = (
        f"torch._inductor.config.post_grad_custom_post_pass = "
        f"__import__({__name__!r}).buggy_constant_mul_pass"
    )
    module = WithConstant()
    repro = write_case(aten_case(module, [torch.randn(40)], config_source=config), tmp_path)

    result = minify_repro(repro, isolate=False)

    assert result.ops_after == 1 and result.path is not None
    mul = only_op(Path(result.path))
    constant = next(arg for arg in mul.args if arg.op == "get_attr")
    assert mul.target is aten.mul.Tensor
    torch.testing.assert_close(
        getattr(load_case(result.path).gm, constant.target), module.constant, rtol=0, atol=0
    )


@pytest.mark.slow
@pytest.mark.parametrize("kind", [FailureKind.COMPILE_ERROR, FailureKind.RUNTIME_ERROR])
def test_errors_minify_to_the_relu_with_the_same_error(tmp_path: Path, kind: str) -> None:
    config = RELU_BUG.format(str(kind))
    inputs = [torch.randn(16)]
    gm = make_fx(sin_relu_cos(3, 3))(*inputs)
    with InProcessJudge(config) as judge:
        recorded = judge(gm, inputs, JudgeSettings())
    assert recorded.failure == kind
    repro = write_case(
        ReproCase(gm, inputs, kind, "errors", expected_error=recorded.error, config_source=config),
        tmp_path,
    )

    result = minify_repro(repro, isolate=False)

    assert result.ops_after == 1 and only_op(Path(result.path or "")).target is aten.relu.default
    assert load_case(result.path or "").expected_error == recorded.error


@pytest.mark.slow
def test_a_tiny_budget_writes_a_failing_graph_labelled_not_minimal(tmp_path: Path) -> None:
    repro = write_case(
        aten_case(sin_relu_cos(), [torch.randn(64)], config_source=RELU_BUG.format("accuracy")),
        tmp_path,
    )

    result = minify_repro(repro, timeout_s=0.0, isolate=False)

    assert (
        result.stop is StopReason.TIME_BUDGET and result.ops_after > 1 and result.path is not None
    )
    assert "NOT MINIMAL" in result.note and "(time budget hit: not minimal)" in result.summary_line(
        "case"
    )
    text = Path(result.path).read_text()
    assert "time budget hit: not minimal)" in next(
        line for line in text.splitlines() if line.startswith("# status:")
    )
    minified = load_case(result.path)
    with inductor_config({"cpp.inject_relu_bug_TESTING_ONLY": "accuracy"}):
        assert (
            judge_graph(minified.gm, minified.inputs, minified.tol, False).failure
            == FailureKind.ACCURACY
        )


@pytest.mark.slow
def test_a_repro_that_does_not_fail_writes_nothing_and_leaks_no_config(tmp_path: Path) -> None:
    def sines(x: torch.Tensor) -> tuple[torch.Tensor]:
        return (torch.sin(torch.sin(x)),)

    repro = write_case(
        aten_case(sines, [torch.randn(16)], config_source=RELU_BUG.format("accuracy")), tmp_path
    )

    result = minify_repro(repro, isolate=False)

    assert result.path is None and result.stop is StopReason.NOT_REPRODUCED
    assert "matches the reference" in result.note
    assert result.summary_line("case").startswith("not minified case: the repro does not reproduce")
    assert sorted(path.name for path in tmp_path.iterdir() if path.suffix == ".py") == ["repro.py"]
    assert inductor_config_diff().get("cpp.inject_relu_bug_TESTING_ONLY") is None


def test_a_repro_whose_graph_fails_eagerly_is_a_defect_unless_memory_ran_out(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def product(a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor]:
        return (torch.mm(a, b),)

    traced = aten_case(product, [torch.randn(2, 3), torch.randn(3, 2)])
    good = write_case(traced, tmp_path / "good")
    assert repro_defect(good) is None
    # Inputs that do not fit the graph: as a renderer writing the wrong values would leave them.
    bad = write_case(
        ReproCase(traced.gm, [torch.randn(2, 3), torch.randn(2, 3)], FailureKind.ACCURACY, "t"),
        tmp_path / "bad",
    )
    assert (repro_defect(bad) or "").startswith(
        "the graph fails when run eagerly on its inputs: RuntimeError"
    )

    def out_of_memory(path: Path) -> ReproCase:
        raise RuntimeError("loading failed") from torch.OutOfMemoryError(
            "no room for a second copy"
        )

    monkeypatch.setattr("pytest_torchcompile.repros.loading.load_case", out_of_memory)
    assert repro_defect(good) is None


# --- a deviation spread over the graph -------------------------------------------------------------


def sines(count: int) -> Callable[[torch.Tensor], tuple[torch.Tensor]]:
    def chain(x: torch.Tensor) -> tuple[torch.Tensor]:
        for _ in range(count):
            x = torch.sin(x)
        return (x,)

    return chain


def accumulating(
    deviates_from: int, fails_with_ops: int, culprit: Any = None
) -> Callable[..., GraphVerdict]:
    """A fake judge of a chain: the probe of every intermediate finds them deviating from the
    ``deviates_from``-th on; a candidate fails only with ``fails_with_ops`` ops or more, as
    rounding that accumulates does, or where it keeps ``culprit``."""

    def judge(gm: torch.fx.GraphModule, inputs: list[Any]) -> GraphVerdict:
        outputs = gm(*inputs)
        if len(outputs) > 1:  # the probe: every intermediate, in order
            passed = [index < deviates_from for index in range(len(outputs))]
        else:
            passed = [len(ops_of(gm)) < fails_with_ops and culprit not in targets_of(gm)]
        leaves = [
            LeafResult(f"graph_out[{index}]", (4,), "float32", ok, "fp64 rmse")
            for index, ok in enumerate(passed)
        ]
        return GraphVerdict(None if all(passed) else FailureKind.ACCURACY, leaves)

    return judge


def test_a_deviation_spread_over_many_ops_is_called_rounding_early() -> None:
    case = aten_case(sines(60), [torch.randn(4)])
    reduction = minify_graph(case, accumulating(deviates_from=30, fails_with_ops=50))
    assert reduction.stop is StopReason.SPREAD and reduction.gm is None
    assert reduction.how.startswith("spread over 30 ops, consistent with accumulated rounding")
    assert reduction.compiles <= 4  # the locate run, the op where it first shows, two windows


def test_an_op_that_fails_alone_among_many_deviating_ones_is_still_found() -> None:
    def planted(x: torch.Tensor) -> tuple[torch.Tensor]:
        for index in range(60):
            x = torch.relu(x) if index == 30 else torch.sin(x)
        return (x,)

    case = aten_case(planted, [torch.randn(4)])
    reduction = minify_graph(
        case, accumulating(deviates_from=30, fails_with_ops=50, culprit=aten.relu.default)
    )
    assert reduction.stop is StopReason.MINIMAL and reduction.gm is not None
    assert targets_of(reduction.gm) == [aten.relu.default]
