"""Patterns of real code that once gave false failures, plugin errors or a silent pass: memory a
library allocates with ``torch.empty`` and fills slice by slice, compiled code re-run on inputs
laid out unlike those it was compiled for, the user's Inductor config, models whose results hold
no tensor."""

from __future__ import annotations

import operator
import pickle
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from pytest_torchcompile.checking.model import check_model
from pytest_torchcompile.common.results import CaseResult, StopReason
from pytest_torchcompile.common.settings import CheckOptions
from pytest_torchcompile.common.verdict import Status
from pytest_torchcompile.judging.case import ReproCase
from pytest_torchcompile.judging.copies import clone_values, strided_copy
from pytest_torchcompile.judging.judge import DYNAMO
from pytest_torchcompile.judging.references import unwritten_elements
from pytest_torchcompile.minifying.search import minify_graph
from pytest_torchcompile.reporting import baseline
from pytest_torchcompile.reporting.cells import checks_summary
from pytest_torchcompile.reporting.github import github_summary_markdown
from pytest_torchcompile.reporting.json_report import json_report
from pytest_torchcompile.reporting.junit import junit_properties
from pytest_torchcompile.reporting.layout import TerminalLayout
from pytest_torchcompile.repros.loading import load_repro, repro_defect
from pytest_torchcompile.repros.repro import write_repro

RELU_BUG = {"cpp.inject_relu_bug_TESTING_ONLY": "accuracy"}


def spatial_gradient3d(x: torch.Tensor) -> torch.Tensor:
    """Central differences along each axis, written into an empty buffer one slice at a time."""
    b, c, d, h, w = x.shape
    padded = F.pad(x, [1, 1, 1, 1, 1, 1], "replicate")
    out = torch.empty(b, c, 3, d, h, w, dtype=x.dtype)
    out[:, :, 0] = 0.5 * (padded[:, :, 1:-1, 1:-1, 2:] - padded[:, :, 1:-1, 1:-1, :-2])
    out[:, :, 1] = 0.5 * (padded[:, :, 1:-1, 2:, 1:-1] - padded[:, :, 1:-1, :-2, 1:-1])
    out[:, :, 2] = 0.5 * (padded[:, :, 2:, 1:-1, 1:-1] - padded[:, :, :-2, 1:-1, 1:-1])
    return out


def half_written(x: torch.Tensor) -> torch.Tensor:
    out = x.new_empty(x.shape[0], 4)
    out[:, :2] = x.relu()
    return out


def test_a_buffer_filled_slice_by_slice_passes_with_the_masked_deviation_probe() -> None:
    torch.manual_seed(0)
    outcome = check_model(
        spatial_gradient3d, (torch.randn(2, 3, 4, 5, 6),), options=CheckOptions(intermediates=True)
    )
    assert outcome.status is Status.PASS, outcome.message


def test_an_output_part_written_is_judged_where_written_only() -> None:
    torch.manual_seed(0)
    outcome = check_model(half_written, (torch.randn(5, 2),))
    assert outcome.status is Status.PASS, outcome.message
    caught = check_model(
        half_written, (torch.randn(5, 2),), options=CheckOptions(inductor_config=RELU_BUG)
    )
    assert caught.status is Status.FAIL_ACCURACY, caught.message


def test_unwritten_elements_follow_the_memory_no_op_wrote() -> None:
    def graph(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        buffer = torch.empty(3, 4)
        buffer[:, 1] = x
        full = torch.empty_like(buffer)
        full.copy_(x.unsqueeze(1).expand(3, 4))
        return buffer, buffer.sum(0), full

    masks = unwritten_elements(graph, [torch.randn(3)])
    assert masks is not None
    written_column = torch.ones(3, 4, dtype=torch.bool)
    written_column[:, 1] = False
    assert torch.equal(masks[0], written_column)
    assert torch.equal(masks[1], torch.tensor([True, False, True, True]))
    assert masks[2] is None
    assert unwritten_elements(lambda x: (x.sin(),), [torch.randn(3)]) is None


def test_strided_copy_keeps_size_stride_and_storage_offset() -> None:
    for value in (
        torch.randn(4, 6, 8)[:, 1:5, 2:7],
        torch.randn(3, 1).expand(3, 4),
        torch.randn(2, 3).t(),
    ):
        copy = strided_copy(value)
        assert (copy.shape, copy.stride(), copy.storage_offset()) == (
            value.shape,
            value.stride(),
            value.storage_offset(),
        )
        assert torch.equal(copy, value)
        assert copy.untyped_storage().data_ptr() != value.untyped_storage().data_ptr()


class SlicedUpsample(torch.nn.Module):
    """A slice of an interpolated activation before a conv: the backward graph receives the saved
    slice with the strides of the whole activation."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 3, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.interpolate(x, scale_factor=2.0, mode="bilinear", align_corners=False)
        return self.conv(y[:, :, 1:7, 1:8]).relu()


def test_a_backward_graph_is_rerun_on_inputs_laid_out_as_compiled() -> None:
    torch.manual_seed(0)
    outcome = check_model(
        SlicedUpsample(),
        (torch.randn(2, 3, 5, 5),),
        options=CheckOptions(backward=True, inductor_config=RELU_BUG),
    )
    assert outcome.status is Status.FAIL_ACCURACY, outcome.message
    assert outcome.failing_graphs and outcome.failing_graphs[0].inputs is not None


def test_fallback_random_is_applied_only_to_graphs_that_draw_random_numbers() -> None:
    torch.manual_seed(0)
    plain = check_model(torch.nn.Linear(8, 8), (torch.randn(4, 8),))
    assert plain.status is Status.PASS and plain.graphs, plain.message
    assert all("fallback_random = True" not in graph.config_source for graph in plain.graphs)
    dropout = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Dropout(0.5)).train()
    drawn = check_model(dropout, (torch.randn(16, 8),), options=CheckOptions(backward=True))
    assert drawn.status is Status.PASS and drawn.fallback_random, drawn.message
    sources = {graph.kind: graph.config_source for graph in drawn.graphs}
    assert "fallback_random = True" in sources["forward"]
    assert "fallback_random = True" not in sources["backward"]


class ConvDropout(torch.nn.Module):
    """A dropout on a convolution's activations, as in DenseNet's or timm's conv blocks."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.norm = torch.nn.BatchNorm2d(8)
        self.dropout = torch.nn.Dropout(0.3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.dropout(torch.relu(self.norm(self.conv(x)))).mean((2, 3))


def test_random_graphs_compile_with_eagers_layout_and_others_with_the_users() -> None:
    """A kernel fills its draws in memory order: torch 2.11's Inductor handed the dropout the
    convolution's output laid out channels-last, so the compiled mask put other draws on other
    elements than eager's, and a correct model failed (3 of 7 outputs, ratio 1e6) in both paths."""
    torch.manual_seed(0)
    outcome = check_model(
        ConvDropout().train(), (torch.randn(4, 3, 8, 8),), options=CheckOptions(backward=True)
    )
    assert outcome.status is Status.PASS and outcome.fallback_random, outcome.message
    sources = {graph.kind: graph.config_source for graph in outcome.graphs}
    assert "layout_optimization = False" in sources["forward"]
    assert "layout_optimization" not in sources["backward"]


@pytest.mark.parametrize(
    "result", [None, "done", object(), "generator"], ids=["none", "str", "object", "generator"]
)
def test_a_check_that_judged_no_tensor_is_not_judged_not_passed(result: object) -> None:
    def fn(x: torch.Tensor) -> object:
        x.sin()
        return (value for value in [x]) if result == "generator" else result

    outcome = check_model(fn, (torch.randn(3),))
    assert outcome.status is Status.NOT_JUDGED, outcome.message
    assert outcome.passed and "nothing judged" in outcome.message


def test_not_judged_checks_are_counted_apart_in_every_report() -> None:
    results = [
        CaseResult("t.py::a", Status.PASS, ""),
        CaseResult("t.py::b", Status.NOT_JUDGED, "nothing judged"),
    ]
    assert "1 pass, 1 not_judged" in checks_summary(results)
    report = json_report(results, None, {})
    assert report["counts"]["checks"]["not_judged"] == 1 and report["counts"]["checks"]["pass"] == 1
    assert report["counts"]["tests"]["not_judged"] == 1
    assert "1 not_judged" in github_summary_markdown(results, None)
    assert ("torchcompile_status", "not_judged") in junit_properties(
        results[1], TerminalLayout().public
    )
    assert baseline.test_status(results) is Status.NOT_JUDGED and not baseline.is_failing(
        Status.NOT_JUDGED
    )


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    return torch.cat((-x[..., x.shape[-1] // 2 :], x[..., : x.shape[-1] // 2]), dim=-1)


def decoder_step(
    x: torch.Tensor, k_cache: torch.Tensor, inv_freq: torch.Tensor, pos: int
) -> tuple[torch.Tensor, ...]:
    """What a transformers decoder hands Inductor: rotary embeddings, a KV cache written by
    setitem, a causal mask built with masked_fill and setitem, in-place ops through views."""
    t = x.shape[2]
    freqs = torch.outer(torch.arange(pos, pos + t, dtype=torch.float32), inv_freq)
    emb = torch.cat((freqs, freqs), dim=-1)
    q = x * emb.cos() + _rotate_half(x) * emb.sin()
    k_cache[:, :, pos : pos + t] = q
    mask = torch.zeros(t, pos + t).masked_fill(
        torch.ones(t, pos + t, dtype=torch.bool).triu(pos + 1), float("-inf")
    )
    mask[:, 0] = 0.0
    scores = q @ k_cache[:, :, : pos + t].transpose(-1, -2) + mask
    row = k_cache[0, 0]
    row += 1.0
    row *= 0.5
    out = scores.softmax(-1) @ k_cache[:, :, : pos + t]
    out[..., -1] -= 1.0
    return out.add_(x.mean()), k_cache.sum(2)


def test_a_torch_level_repro_of_setitem_and_in_place_ops_builds_and_computes_the_graph(
    tmp_path: Path,
) -> None:
    graphs: list[torch.fx.GraphModule] = []

    def capture(gm: torch.fx.GraphModule, inputs: list[torch.Tensor]) -> torch.fx.GraphModule:
        graphs.append(gm)
        return gm

    torch.manual_seed(0)
    given = {
        "x": torch.randn(2, 2, 3, 8),
        "k_cache": torch.zeros(2, 2, 6, 8),
        "inv_freq": torch.rand(4),
    }
    torch.compile(decoder_step, backend=capture, fullgraph=True)(
        *clone_values(list(given.values())), 2
    )
    (gm,) = graphs
    inputs = [
        given[node.target[2:-1]] for node in gm.graph.nodes if node.op == "placeholder"
    ]  # L_<name>_
    assert {operator.setitem, operator.iadd, operator.imul} <= {
        node.target for node in gm.graph.nodes
    }
    path = write_repro(
        ReproCase(gm, inputs, "accuracy", "decoder step", level=DYNAMO), tmp_path / "repro.py"
    )

    assert repro_defect(path) is None
    case = load_repro(path).case
    pickle.dumps(case.gm)  # as it is sent to a judging process
    for rebuilt, expected in zip(
        case.gm(*clone_values(case.inputs)), gm(*clone_values(inputs)), strict=True
    ):
        assert torch.equal(rebuilt, expected)


def test_a_repro_keeps_the_ops_that_make_a_tensor_from_nothing(tmp_path: Path) -> None:
    aten = torch.ops.aten
    graph = torch.fx.Graph()
    x = graph.placeholder("x")
    empty = graph.call_function(
        aten.empty.memory_format, ([2, 3],), {"dtype": torch.float32, "device": torch.device("cpu")}
    )
    zeros = graph.call_function(torch.zeros, (2, 3))
    graph.output((empty, graph.call_function(aten.add.Tensor, (zeros, x))))
    gm = torch.fx.GraphModule(torch.nn.Module(), graph)
    path = write_repro(
        ReproCase(gm, [torch.randn(2, 3)], "accuracy", "factories"), tmp_path / "repro.py"
    )

    rebuilt = load_repro(path).case.gm
    targets = [node.target for node in rebuilt.graph.nodes if node.op == "call_function"]
    assert targets == [aten.empty.memory_format, torch.zeros, aten.add.Tensor]


def test_minifying_a_graph_without_ops_says_why_instead_of_raising() -> None:
    graph = torch.fx.Graph()
    graph.output((graph.placeholder("x"),))
    case = ReproCase(
        torch.fx.GraphModule(torch.nn.Module(), graph), [torch.randn(3)], "accuracy", "no op"
    )

    reduction = minify_graph(case, lambda gm, inputs: pytest.fail("nothing is to be judged"))

    assert reduction.stop is StopReason.NOT_REPRODUCED and "no op" in reduction.how


def test_a_repro_gives_its_graph_inputs_laid_out_as_they_were(tmp_path: Path) -> None:
    inputs = [
        torch.randn(4, 6, 8)[:, 1:5, 2:7],
        torch.randn(3, 1).expand(3, 4),
        torch.randn(40, 50)[3:, 7:].t(),
    ]
    gm = torch.fx.symbolic_trace(lambda a, b, c: (a.sum() + b.sum() + c.sum(),))
    path = write_repro(ReproCase(gm, inputs, "accuracy", "layouts"), tmp_path / "repro.py")

    for loaded, given in zip(load_repro(path).case.inputs, inputs, strict=True):
        assert (loaded.shape, loaded.stride(), loaded.storage_offset()) == (
            given.shape,
            given.stride(),
            given.storage_offset(),
        )
        assert torch.equal(loaded, given)
