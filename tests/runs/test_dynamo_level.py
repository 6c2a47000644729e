"""Bugs the post-AOT graph cannot show: a wrong decomposition is already in the graph Inductor
receives, so those cases are written, judged and minified at the torch (Dynamo) level."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from torch._inductor import decomposition
from torch._inductor.decomposition import decompositions

from pytest_torchcompile.checking.model import check_model
from pytest_torchcompile.checking.plain import GraphChecker
from pytest_torchcompile.common.results import StopReason
from pytest_torchcompile.common.settings import CheckOptions
from pytest_torchcompile.common.verdict import Status
from pytest_torchcompile.judging.case import ReproCase
from pytest_torchcompile.judging.isolation.parent import InProcessJudge
from pytest_torchcompile.judging.isolation.protocol import JudgeSettings
from pytest_torchcompile.judging.judge import DYNAMO, POST_AOT
from pytest_torchcompile.minifying.search import minify_graph
from pytest_torchcompile.repros.loading import load_repro
from pytest_torchcompile.repros.repro import write_repro

pytest_plugins = ["pytester"]

aten = torch.ops.aten

MUTANT = """
import torch
from torch._inductor import decomposition
from torch._inductor.decomposition import decompositions

_silu = decompositions[torch.ops.aten.silu.default]
decompositions[torch.ops.aten.silu.default] = lambda x: _silu(x) * 1.01
"""
"""Inductor's silu decomposition made 1% wrong in every process that starts with it on its path
(``sitecustomize``): the test's, the minifier's child, the repro's."""

GATED_MLP = """
import torch
import torch.nn.functional as F


class GatedMLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.up = torch.nn.Linear(16, 32)
        self.gate = torch.nn.Linear(16, 32)
        self.down = torch.nn.Linear(32, 16)

    def forward(self, x):
        return self.down(F.silu(self.gate(x)) * self.up(x))


def test_gated_mlp(compile_accuracy):
    torch.manual_seed(0)
    compile_accuracy(GatedMLP(), torch.randn(8, 16))
"""


@pytest.fixture
def wrong_decomposition() -> Iterator[Callable[[torch._ops.OpOverload, float], None]]:
    """Make Inductor's decomposition of an op ``factor`` times its right value, in this process."""
    saved: dict[torch._ops.OpOverload, Callable[..., object]] = {}

    def install(op: torch._ops.OpOverload, factor: float) -> None:
        original = decompositions[op]
        saved.setdefault(op, original)

        def wrong(*args: object, **kwargs: object) -> object:
            result = original(*args, **kwargs)
            if isinstance(result, tuple):
                return (result[0] * factor, *result[1:])
            return result * factor  # type: ignore[operator]

        decompositions[op] = wrong
        _forget_derived_tables()

    yield install
    decompositions.update(saved)
    _forget_derived_tables()


def _forget_derived_tables() -> None:
    # Inductor caches a copy of the table with its random-op decompositions added.
    cached = getattr(decomposition, "fast_random_decomps", None)
    if cached is not None and hasattr(cached, "cache_clear"):
        cached.cache_clear()


class NormedMLP(torch.nn.Module):
    """call_method nodes (``view``, ``sum``) as well as functions, as Dynamo captures them."""

    def __init__(self) -> None:
        super().__init__()
        self.norm = torch.nn.LayerNorm(16)
        self.proj = torch.nn.Linear(16, 16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.tanh(self.proj(self.norm(x)))
        return y.view(-1, 4).sum(1) + x.mean()


def _minify_in_process(case: ReproCase) -> torch.fx.GraphModule:
    with InProcessJudge(case.config_source) as judge:
        reduction = minify_graph(
            case, lambda gm, inputs: judge(gm, inputs, JudgeSettings.for_minifying(case))
        )
    assert reduction.stop is StopReason.MINIMAL and reduction.gm is not None, reduction.how
    return reduction.gm


def _ops(gm: torch.fx.GraphModule) -> list[object]:
    return [
        node.target
        for node in gm.graph.nodes
        if node.op in ("call_function", "call_method", "call_module")
    ]


@pytest.mark.slow
@pytest.mark.parametrize("backward", [False, True], ids=["inference", "training"])
def test_wrong_layer_norm_decomposition_is_written_and_minified_at_the_torch_level(
    tmp_path: Path,
    wrong_decomposition: Callable[[torch._ops.OpOverload, float], None],
    backward: bool,
) -> None:
    wrong_decomposition(aten.native_layer_norm.default, 1.01)
    torch.manual_seed(0)
    outcome = check_model(
        NormedMLP(), (torch.randn(8, 16),), options=CheckOptions(backward=backward)
    )

    assert outcome.status is Status.FAIL_ACCURACY
    (failing,) = outcome.failing_graphs
    assert failing.dynamo is not None and failing.inputs is not None, (
        "the post-AOT graph passes on its own"
    )
    assert "post-AOT graph passes on its own" in failing.note
    case = ReproCase(
        failing.dynamo.gm,
        failing.inputs,
        "accuracy",
        "layer norm",
        tol=outcome_tolerance(backward),
        config_source=failing.dynamo.config_source,
        grad_enabled=backward,
        level=DYNAMO,
    )
    repro = write_repro(case, tmp_path / "repro.py")
    assert "# level:   torch-level graph" in repro.read_text()
    assert load_repro(repro).case.level == DYNAMO

    minimal = _minify_in_process(load_repro(repro).case)

    assert _ops(minimal) == [F.layer_norm]


def outcome_tolerance(backward: bool) -> float:
    return CheckOptions(backward=backward).tolerance


def test_a_bug_the_post_aot_graph_shows_keeps_the_post_aot_repro() -> None:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
    options = CheckOptions(inductor_config={"cpp.inject_relu_bug_TESTING_ONLY": "accuracy"})

    outcome = check_model(model, (torch.randn(4, 8),), options=options)

    assert outcome.status is Status.FAIL_ACCURACY
    assert outcome.failing_graphs and outcome.failing_graphs[0].dynamo is None
    assert outcome.failing_graphs[0].graph.dynamo is not None, (
        "each post-AOT graph knows its torch-level graph"
    )


def test_a_correct_model_passes_with_the_torch_level_capture() -> None:
    torch.manual_seed(0)
    outcome = check_model(NormedMLP(), (torch.randn(8, 16),), options=CheckOptions(backward=True))
    assert outcome.status is Status.PASS, outcome.message


def test_repro_files_without_a_level_load_as_post_aot(tmp_path: Path) -> None:
    gm = torch.fx.symbolic_trace(lambda x: (torch.relu(x),))
    repro = write_repro(ReproCase(gm, [torch.randn(4)], "accuracy", "old"), tmp_path / "repro.py")
    repro.write_text(repro.read_text().replace("LEVEL = 'post_aot'\n", ""))
    assert load_repro(repro).case.level == POST_AOT


@pytest.mark.slow
def test_wrong_silu_decomposition_end_to_end(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    mutant = pytester.mkdir("mutant")
    (mutant / "sitecustomize.py").write_text(MUTANT)
    without_mutant = os.environ.get("PYTHONPATH", "")
    with_mutant = os.pathsep.join([str(mutant), without_mutant])
    monkeypatch.setenv("PYTHONPATH", with_mutant)
    pytester.makepyfile(test_model=GATED_MLP)

    # A process of its own: the mutant is a sitecustomize, read as an interpreter starts.
    result = pytester.runpytest_subprocess("--compile-accuracy", "-p", "no:cacheprovider")

    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*minified *: 5 -> 1 ops in *"])
    result.stdout.fnmatch_lines(["*failing graph: torch-level graph 0 from*"])
    # The check's own compile of the torch-level graph is not a plain compile of the test.
    result.stdout.fnmatch_lines(["compile accuracy: 1 check in 1 test: 1 fail_accuracy"])
    result.stdout.no_fnmatch_line("*plain torch.compile graphs*")
    (directory,) = (pytester.path / ".compile-accuracy").glob("*gated_mlp*/")
    repro, minified = directory / "repro.py", directory / "minified.py"
    assert "# level:   torch-level graph" in repro.read_text()
    text = minified.read_text()
    assert "torch.nn.functional.silu(" in text and "# --- the post-AOT graphs" in text
    assert "1.01)" in text.split("# --- the post-AOT graphs")[1], (
        "the lowered graph shows the wrong decomposition"
    )

    def run(path: Path, pythonpath: str) -> int:
        env = {**os.environ, "PYTHONPATH": pythonpath}
        return subprocess.run([sys.executable, str(path)], env=env, capture_output=True).returncode

    assert run(repro, with_mutant) == 1 and run(minified, with_mutant) == 1
    # Standalone, without the injected decomposition, the compiler is right: the repro passes.
    assert run(minified, without_mutant) == 0


@pytest.mark.slow
def test_plain_torch_compile_call_with_a_wrong_decomposition_fails_at_the_torch_level(
    wrong_decomposition: Callable[[torch._ops.OpOverload, float], None],
) -> None:
    wrong_decomposition(aten.native_layer_norm.default, 1.01)
    torch.manual_seed(0)
    model, x = NormedMLP(), torch.randn(8, 16)
    checker = GraphChecker(1e-4, check_non_float=True, intermediates=False)
    torch._dynamo.reset()
    with checker.watching(), torch.no_grad():
        torch.compile(model)(x)

    (failure,) = checker.tally.failures
    assert failure.dynamo is not None and failure.status is Status.FAIL_ACCURACY
    assert failure.message.startswith("1 of 1 outputs of torch-level graph 0")
