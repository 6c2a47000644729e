"""Training checks (gradients, optimizer steps), dynamic shapes, masked deviations, and reuse of
compiled code across checks: check_model with real Inductor compiles on the CPU."""

from __future__ import annotations

import pytest
import torch
from models import ReluInBackward, sin_relu_cos
from torch.fx.experimental.proxy_tensor import make_fx

from pytest_torchcompile.checking.compiled import CompiledCache
from pytest_torchcompile.checking.masked import ProbeChildren
from pytest_torchcompile.checking.model import check_model
from pytest_torchcompile.checking.plain import GraphChecker
from pytest_torchcompile.common.kinds import FailureKind
from pytest_torchcompile.common.settings import CheckOptions
from pytest_torchcompile.common.verdict import DEFAULT_TOLERANCE, Status
from pytest_torchcompile.judging.judge import GraphVerdict
from pytest_torchcompile.judging.slicing import GraphSlicer
from pytest_torchcompile.torch_internals.compiling import reset
from pytest_torchcompile.torch_internals.config import inductor_config

RELU_BUG = {"cpp.inject_relu_bug_TESTING_ONLY": "accuracy"}


class BackwardOnlyRelu(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return ReluInBackward.apply(self.linear(x)).sin()


def test_backward_only_bug_is_caught_on_gradients() -> None:
    torch.manual_seed(0)
    x = torch.randn(16, 8, requires_grad=True)
    forward_only = check_model(
        BackwardOnlyRelu(), (x,), options=CheckOptions(inductor_config=RELU_BUG)
    )
    assert forward_only.status is Status.PASS, forward_only.message
    outcome = check_model(
        BackwardOnlyRelu(), (x,), options=CheckOptions(inductor_config=RELU_BUG, backward=True)
    )
    assert outcome.status is Status.FAIL_ACCURACY
    failing = {leaf.path for leaf in outcome.comparison.failing}
    assert "grad['linear.weight']" in failing and "grad['args[0]']" in failing
    assert outcome.failing_graphs[0].graph.kind == "backward"


def test_optimizer_steps_compare_parameters() -> None:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1))
    x = torch.randn(16, 8)
    clean = check_model(model, (x,), options=CheckOptions(steps=2, lr=0.1))
    assert clean.status is Status.PASS, clean.message
    assert {leaf.path for leaf in clean.comparison.leaves} >= {
        "param['0.weight']",
        "param['2.bias']",
    }
    broken = check_model(
        model, (x,), options=CheckOptions(steps=2, lr=0.1, inductor_config=RELU_BUG)
    )
    assert broken.status is Status.FAIL_ACCURACY
    assert any(leaf.path.startswith("param[") for leaf in broken.comparison.failing)


def test_bug_at_a_later_size_is_found_with_dynamic_shapes(monkeypatch: pytest.MonkeyPatch) -> None:
    import torch._inductor.compile_fx as compile_fx

    real = compile_fx.compile_fx_inner

    def wrong_beyond_eight_rows(gm, example_inputs, **kwargs):  # type: ignore[no-untyped-def]
        compiled = real(gm, example_inputs, **kwargs)

        def run(args):  # type: ignore[no-untyped-def]
            rows = next(a.shape[0] for a in args if isinstance(a, torch.Tensor) and a.dim() == 2)
            outputs = compiled(args)
            return [o + 1.0 if rows > 8 and o.is_floating_point() else o for o in outputs]

        run._boxed_call = True  # type: ignore[attr-defined]
        return run

    monkeypatch.setattr(compile_fx, "compile_fx_inner", wrong_beyond_eight_rows)
    x = torch.randn(4, 8)
    assert (
        check_model(torch.sin, (x,), options=CheckOptions(intermediates=False)).status
        is Status.PASS
    )
    outcome = check_model(torch.sin, (x,), options=CheckOptions(dynamic=True, intermediates=False))
    assert outcome.status is Status.FAIL_ACCURACY
    assert "input sizes [[9, 8]]" in outcome.message
    failing = outcome.failing_graphs[0]
    assert failing.inputs is not None and any(
        getattr(v, "shape", (0,))[0] == 9 for v in failing.inputs
    )
    assert any(s and not s[0].isdigit() for s in failing.graph.symbolic_sizes), (
        failing.graph.symbolic_sizes
    )


def test_masked_deviation_is_caught_by_intermediate_checks_only() -> None:
    x = torch.randn(16, 32)
    without = check_model(
        sin_relu_cos, (x,), options=CheckOptions(inductor_config=RELU_BUG, intermediates=False)
    )
    assert without.status is Status.PASS
    outcome = check_model(sin_relu_cos, (x,), options=CheckOptions(inductor_config=RELU_BUG))
    assert outcome.status is Status.FAIL_ACCURACY
    assert "intermediate 'relu' deviates" in outcome.message and "masks it" in outcome.message
    # The deviating intermediate is a row of the check's table and report, with its figures.
    [row] = outcome.comparison.failing
    assert (
        row.path == "intermediate relu"
        and row.rule == "fp64 rmse"
        and row.rmse_compiled is not None
    )
    cut = outcome.failing_graphs[0].gm
    assert cut is not None
    ops = [n.target for n in cut.graph.nodes if n.op == "call_function"]
    assert ops[-1] == torch.ops.aten.relu.default and torch.ops.aten.cos.default not in ops


def test_a_probe_compiled_in_a_child_while_the_graph_compiles_here_finds_the_masked_deviation(
    child_verdicts: list[GraphVerdict],
    probe_children: ProbeChildren,
) -> None:
    x = torch.randn(16, 32)
    outcome = check_model(
        sin_relu_cos,
        (x,),
        options=CheckOptions(inductor_config=RELU_BUG),
        probe_children=probe_children,
    )
    assert (
        outcome.status is Status.FAIL_ACCURACY and "intermediate 'relu' deviates" in outcome.message
    )
    assert [verdict.failure for verdict in child_verdicts] == [FailureKind.ACCURACY]

    child_verdicts.clear()
    checker = GraphChecker(
        DEFAULT_TOLERANCE, check_non_float=False, intermediates=True, probe_children=probe_children
    )
    with inductor_config(RELU_BUG), checker.watching():
        torch.compile(sin_relu_cos)(x)
    reset()
    assert [verdict.failure for verdict in child_verdicts] == [FailureKind.ACCURACY], (
        "a plain compile's probe"
    )
    [failure] = checker.tally.failures
    assert "intermediate 'relu' deviates" in failure.message and "masks it" in failure.message


def test_a_graph_lowered_with_compiler_code_of_this_process_alone_is_probed_here(
    child_verdicts: list[GraphVerdict],
    probe_children: ProbeChildren,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A lowering this process replaced (abs for relu: a masked deviation) is not the child's:
    the child says so instead of judging a probe compiled with its own, and the probe compiled
    here finds the deviation."""
    from torch._inductor import lowering

    aten = torch.ops.aten
    monkeypatch.setitem(lowering.lowerings, aten.relu.default, lowering.lowerings[aten.abs.default])
    options = CheckOptions(inductor_config={"fx_graph_cache": False})
    outcome = check_model(
        sin_relu_cos, (torch.randn(16, 32),), options=options, probe_children=probe_children
    )
    assert (
        outcome.status is Status.FAIL_ACCURACY and "intermediate 'relu' deviates" in outcome.message
    )
    [verdict] = child_verdicts
    assert (
        verdict.failure == FailureKind.JUDGE_ERROR
        and "torch._inductor.lowering.lowerings[aten.relu.default]" in str(verdict.error)
    )


def relu_behind_views(x: torch.Tensor) -> torch.Tensor:
    for _ in range(20):
        x = x.sin()
    x = x.relu().t().reshape(-1, 16)
    for _ in range(40):
        x = x.cos()
    return x[:, :4].sum(0).view(2, 2)


def test_views_are_judged_through_their_base_only() -> None:
    """A view that rearranges all of a value's elements is not a probe output (it would repeat its
    base's verdict, at the cost of an output), yet a deviation is followed through it to where it
    starts. Values the outputs show unmasked (the slice, the sum, the output view) are judged
    there; those behind the slice, which drops elements, are observed."""
    x = torch.randn(16, 32)
    gm = make_fx(relu_behind_views)(x)
    slicer = GraphSlicer(gm, [x])
    observed = {node.target for node in slicer.hidden_nodes()}
    aten = torch.ops.aten
    assert {aten.relu.default, aten.sin.default, aten.cos.default} <= observed
    assert not {aten.slice.Tensor, aten.sum.dim_IntList, aten.view.default} & observed
    assert not {aten.t.default, aten.permute.default} & observed
    relu = next(node for node in gm.graph.nodes if node.target is aten.relu.default)
    after_relu = next(iter(relu.users))
    assert after_relu.target in (aten.t.default, aten.permute.default)
    assert after_relu in slicer.with_views({relu}) and after_relu not in slicer.with_views(set())

    outcome = check_model(relu_behind_views, (x,), options=CheckOptions(inductor_config=RELU_BUG))
    assert outcome.status is Status.FAIL_ACCURACY
    assert "intermediate 'relu' deviates" in outcome.message, outcome.message


def perturb_every_product(graph: torch.fx.Graph) -> None:
    """A post-grad pass standing in for correct rounding: every product comes out 5e-6 off,
    well inside allclose alone, beyond it after twenty products."""
    for node in list(graph.nodes):
        if node.target is torch.ops.aten.mul.Tensor:
            with graph.inserting_after(node):
                off = graph.call_function(torch.ops.aten.mul.Tensor, (node, 1 + 5e-6))
            node.replace_all_uses_with(off, delete_user_cb=lambda user, off=off: user is not off)


def forty_products_behind_sign(x: torch.Tensor) -> torch.Tensor:
    for _ in range(40):
        x = x * 1.01
    return x.sign()


def test_error_that_only_adds_up_is_not_a_masked_deviation() -> None:
    """The late products deviate beyond the rule, but none does on its own (fed with eager's
    values, alone or with its neighbours): no miscompiled op, so no alarm."""
    config = {"post_grad_custom_post_pass": perturb_every_product}
    outcome = check_model(
        forty_products_behind_sign, (torch.randn(64),), options=CheckOptions(inductor_config=config)
    )
    assert outcome.status is Status.PASS, outcome.message


def test_clean_model_has_no_intermediate_false_alarm() -> None:
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(32, 64), torch.nn.GELU(), torch.nn.LayerNorm(64), torch.nn.Linear(64, 8)
    ).eval()
    outcome = check_model(model, (torch.randn(16, 32),))
    assert outcome.status is Status.PASS, outcome.message


def test_compiled_code_is_reused_across_checks_of_one_test() -> None:
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Tanh()).eval()
    cache = CompiledCache()
    options = CheckOptions(dynamic=True, intermediates=False)
    first = check_model(model, (torch.randn(3, 8),), options=options, cache=cache)
    assert first.status is Status.PASS
    compiled_graphs = len(first.graphs)
    for rows in (5, 7, 11):
        again = check_model(model, (torch.randn(rows, 8),), options=options, cache=cache)
        assert again.status is Status.PASS
        assert len(again.graphs) == compiled_graphs, "a later example recompiled"
    with torch.no_grad():
        model[0].weight.add_(1.0)
    changed = check_model(model, (torch.randn(3, 8),), options=options, cache=cache)
    assert changed.status is Status.PASS
    assert len(cache.entries) == 1 and len(changed.graphs) == compiled_graphs, "stale copy reused"
    cache.clear()
    assert not cache.entries
    reset()


def smooth_chain(x: torch.Tensor) -> torch.Tensor:
    return (x * 2 + 1).exp() @ x.t()


def test_a_graph_where_no_op_can_mask_a_deviation_is_not_probed() -> None:
    """Every deviation of such a graph reaches its outputs, which are judged: its probe would pay
    a second compile for nothing. Behind a masking op, the values whose every path to the outputs
    it crosses are probed; a masking op that another path bypasses (the abs of a kernel the graph
    also divides by it) hides nothing."""
    x = torch.randn(8, 8)
    assert GraphSlicer(make_fx(smooth_chain)(x), [x]).hidden_nodes() == []
    normalised = make_fx(lambda v: smooth_chain(v / v.abs().sum()))(x)
    assert GraphSlicer(normalised, [x]).hidden_nodes() == []
    masked = make_fx(lambda v: smooth_chain(v).relu().exp())(x)
    aten = torch.ops.aten
    assert [node.target for node in GraphSlicer(masked, [x]).hidden_nodes()] == [
        aten.mul.Tensor,
        aten.add.Tensor,
        aten.exp.default,
        aten.mm.default,
    ]


def test_a_graph_with_dynamic_shapes_is_probed_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Called at several sizes, its outputs are judged at each, its intermediates once: each probe
    is a compile of its own."""
    import pytest_torchcompile.checking.plain as plain

    probed: list[int] = []
    real = plain.find_masked_deviation
    monkeypatch.setattr(
        plain,
        "find_masked_deviation",
        lambda gm, inputs, *rest: probed.append(len(inputs)) or real(gm, inputs, *rest),
    )
    checker = GraphChecker(DEFAULT_TOLERANCE, check_non_float=False, intermediates=True)
    compiled = torch.compile(sin_relu_cos, dynamic=True)
    with checker.watching():
        for rows in (3, 5, 7):
            compiled(torch.randn(rows, 4))
    reset()
    assert len(checker._judged) == 3 and len(probed) == 1
    assert not checker.tally.failures


def quantised_then_clamped(x: torch.Tensor) -> torch.Tensor:
    return ((x * 3.0).exp().round() * 2.0).clamp(max=-1.0)


def scaled_then_clamped(x: torch.Tensor) -> torch.Tensor:
    return ((x * 3.0).exp().sin() * 2.0).clamp(max=-1.0)


@pytest.mark.parametrize(
    ("model", "judged_after_probe"), [(quantised_then_clamped, [1]), (scaled_then_clamped, [9])]
)
def test_a_deviation_starting_at_a_rounding_op_is_judged_on_eagers_values_only(
    monkeypatch: pytest.MonkeyPatch, model: object, judged_after_probe: list[int]
) -> None:
    """Among compiled neighbours, one ulp more or less from a fused product can move a rounded value
    by a whole step: a deviation that starts at a rounding op counts only if the op alone, fed
    with eager's values, deviates. Another op's start is tried alone and with its neighbours
    (three cuts of 1, 3 and 5 ops), side by side in one compile."""
    import pytest_torchcompile.checking.masked as masked
    from pytest_torchcompile.common.leaves import LeafResult

    x = torch.randn(8)
    gm = make_fx(model)(x)
    root = [node for node in gm.graph.nodes if node.op == "call_function"][2]
    judged: list[int] = []

    def judge(candidate, inputs, tol, check_non_float):  # type: ignore[no-untyped-def]
        judged.append(sum(node.op == "call_function" for node in candidate.graph.nodes))
        if len(judged) > 1:
            return GraphVerdict(None)
        index = next(
            i
            for i, node in enumerate(candidate.graph.output_node().args[0])
            if node.name == root.name
        )
        return GraphVerdict(
            FailureKind.ACCURACY,
            [
                LeafResult(
                    f"graph_out[{index}]",
                    (8,),
                    "torch.float32",
                    False,
                    "rmse",
                    rmse_compiled=1.0,
                    rmse_eager=1e-7,
                )
            ],
        )

    monkeypatch.setattr(masked, "judge_graph", judge)
    assert masked.find_masked_deviation(gm, [x], DEFAULT_TOLERANCE) is None
    assert judged[1:] == judged_after_probe


def test_a_probe_that_raises_leaves_the_tests_call_alone_and_says_so(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import pytest_torchcompile.checking.plain as plain

    def broken(*args: object) -> None:
        raise KeyError("_tensor_constant1")

    monkeypatch.setattr(plain, "find_masked_deviation", broken)
    checker = GraphChecker(DEFAULT_TOLERANCE, check_non_float=False, intermediates=True)
    x = torch.randn(4, 4)
    with checker.watching():
        result = torch.compile(sin_relu_cos)(x)
    reset()
    torch.testing.assert_close(result, sin_relu_cos(x))
    [unchecked] = checker.tally.unchecked
    assert (
        "intermediates not judged: the probe raised (KeyError" in unchecked
        and not checker.tally.failures
    )


def scaled_into_softmax(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return torch.softmax(x * w, -1)


def test_a_value_behind_a_decomposed_softmax_is_probed() -> None:
    """Inductor receives a softmax as ``amax``, ``sub``, ``exp``, ``sum`` and ``div``: the ``sub``
    carries its input to the output, yet together they hide a shift of it."""
    checker = GraphChecker(DEFAULT_TOLERANCE, check_non_float=False, intermediates=True)
    x, w = torch.randn(4, 8), torch.randn(8)
    with checker.watching():
        torch.compile(scaled_into_softmax)(x, w)
    reset()
    [graph] = checker.capture.graphs
    observed = [node.name for node in GraphSlicer(graph.gm, graph.calls[0]).hidden_nodes()]
    assert observed[0] == "mul" and "div" not in observed
