"""Classes of real Inductor bugs the plugin once handled wrongly (tests/realbugs shows each):
gradients of a function whose inputs do not require grad; an accuracy failure that is wrong only
in integer outputs, which the minifier must still reproduce; a repro that sets Inductor config
keys another torch lacks; what a run leaves behind; where a graph compiled under options= comes
from."""

from __future__ import annotations

import contextlib
import inspect
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from models import ReluInBackward
from torch.fx.experimental.proxy_tensor import make_fx

from pytest_torchcompile.checking.model import check_model
from pytest_torchcompile.common.kinds import FailureKind
from pytest_torchcompile.common.leaves import LeafResult
from pytest_torchcompile.common.results import StopReason
from pytest_torchcompile.common.settings import CheckOptions
from pytest_torchcompile.common.verdict import Comparison, Status
from pytest_torchcompile.judging.call_site import user_frame
from pytest_torchcompile.judging.case import ReproCase
from pytest_torchcompile.judging.isolation.protocol import JudgeSettings
from pytest_torchcompile.minifying.repro_file import minify_repro
from pytest_torchcompile.repros.loading import load_case
from pytest_torchcompile.repros.repro import write_repro

RELU_BUG = {"cpp.inject_relu_bug_TESTING_ONLY": "accuracy"}


def doubled_sine(x: torch.Tensor, steps: torch.Tensor) -> torch.Tensor:
    return ReluInBackward.apply(x).sin() * steps


def test_backward_without_grad_inputs_differentiates_the_floating_inputs() -> None:
    x = torch.randn(16, 8, generator=torch.Generator().manual_seed(0))
    steps = torch.arange(8)
    clean = check_model(doubled_sine, (x, steps), options=CheckOptions(backward=True))
    assert clean.status is Status.PASS, clean.message
    assert "grad['args[0]']" in {leaf.path for leaf in clean.comparison.leaves}
    assert "gradients taken with respect to the floating inputs args[0]" in clean.message
    assert not x.requires_grad, "the caller's tensor is left as it was"
    broken = check_model(
        doubled_sine, (x, steps), options=CheckOptions(backward=True, inductor_config=RELU_BUG)
    )
    assert broken.status is Status.FAIL_ACCURACY, broken.message
    assert "grad['args[0]']" in {leaf.path for leaf in broken.comparison.failing}


def test_backward_without_anything_to_differentiate_is_a_usage_error_not_an_eager_failure() -> None:
    with pytest.raises(ValueError, match=r"backward=True needs .*floating inputs"):
        check_model(lambda n: n * 2, (torch.arange(4),), options=CheckOptions(backward=True))


# --- a failure only in integer outputs --------------------------------------------------------


def integer_relu(x: torch.Tensor, n: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """An integer relu (wrong under the injected bug) beside a floating output that stays right."""
    return torch.relu(n * 3 - 4) + 1, torch.sin(x)


def integer_case(non_float_failure: bool) -> ReproCase:
    inputs = [torch.randn(32, generator=torch.Generator().manual_seed(0)), torch.arange(32)]
    return ReproCase(
        make_fx(integer_relu)(*inputs),
        inputs,
        FailureKind.ACCURACY,
        "integer_relu",
        config_source="torch._inductor.config.cpp.inject_relu_bug_TESTING_ONLY = 'accuracy'",
        non_float_failure=non_float_failure,
    )


def test_a_failure_only_in_non_float_outputs_is_recorded_as_such() -> None:
    def leaf(dtype: str, passed: bool, rule: str) -> LeafResult:
        return LeafResult("out", (4,), dtype, passed, rule)

    assert Comparison(
        [leaf("int64", False, "exact"), leaf("float32", True, "fp64 rmse")]
    ).fails_only_in_non_float
    assert not Comparison(
        [leaf("bool", False, "exact"), leaf("float32", False, "fp64 rmse")]
    ).fails_only_in_non_float
    assert not Comparison([leaf("int64", True, "exact")]).fails_only_in_non_float


def test_non_float_outputs_are_judged_while_minifying_only_a_failure_that_is_in_them(
    tmp_path: Path,
) -> None:
    assert JudgeSettings.for_minifying(integer_case(non_float_failure=True)).check_non_float
    # A floating failure keeps the rule that a bool mask must not steer its reduction.
    assert not JudgeSettings.for_minifying(integer_case(non_float_failure=False)).check_non_float
    assert load_case(
        write_repro(integer_case(non_float_failure=True), tmp_path / "repro.py")
    ).non_float_failure


def test_an_integer_only_failure_is_minified(tmp_path: Path) -> None:
    repro = write_repro(integer_case(non_float_failure=True), tmp_path / "repro.py")

    result = minify_repro(repro, isolate=False, find_stage=False)

    assert result.stop is StopReason.MINIMAL, result.note
    assert result.ops_before > result.ops_after
    minified = load_case(tmp_path / "minified.py")
    assert minified.check_non_float and minified.non_float_failure
    assert torch.ops.aten.relu.default in {node.target for node in minified.gm.graph.nodes}


# --- a repro written on another torch -----------------------------------------------------------


def test_a_config_key_this_torch_lacks_is_skipped_with_a_note_not_read_as_reproduced(
    tmp_path: Path,
) -> None:
    inputs = [torch.randn(16, generator=torch.Generator().manual_seed(0))]
    config = (
        "torch._inductor.config.a_key_of_another_torch_TESTING_ONLY = 0.5\n"
        "torch._inductor.config.cpp.threads = 1\n"
        "torch._inductor.config.cpp.a_key_of_another_torch_TESTING_ONLY = 'x'"
    )
    case = ReproCase(
        make_fx(lambda x: (torch.relu(x).sin(),))(*inputs),
        inputs,
        FailureKind.ACCURACY,
        "relu_sin",
        config_source=config,
    )
    repro = write_repro(case, tmp_path / "repro.py")

    run = subprocess.run(
        [sys.executable, str(repro)], capture_output=True, text=True, cwd=tmp_path, timeout=300
    )

    assert run.returncode == 0, run.stdout + run.stderr  # fixed: the graph compiles right here
    assert (
        "were skipped: a_key_of_another_torch_TESTING_ONLY, cpp.a_key_of_another_torch_TESTING_ONLY"
        in run.stdout
    )
    assert load_case(repro).config_source == config  # the minifier still reads every line


# --- what a run leaves behind -----------------------------------------------------------------

pytest_plugins = ["pytester"]


def test_a_run_that_runs_no_test_writes_nothing(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_model="def test_nothing():\n    pass\n")

    result = pytester.runpytest(
        "--collect-only", "--compile-accuracy", "-p", "no:cacheprovider", "-p", "no:xdist"
    )

    assert result.ret == 0, result.stdout.str()
    assert not (pytester.path / ".compile-accuracy").exists()


def test_a_run_removes_its_queue_at_its_end_and_keeps_its_repros(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_model="""
import pytest, torch

@pytest.mark.inductor_repro(inductor_config={"cpp.inject_relu_bug_TESTING_ONLY": "accuracy"})
def test_relu(compile_accuracy):
    compile_accuracy(torch.relu, torch.randn(8))
"""
    )
    result = pytester.runpytest(
        "--compile-accuracy", "--no-compile-minify", "-p", "no:cacheprovider", "-p", "no:xdist"
    )

    result.assert_outcomes(failed=1)
    root = pytester.path / ".compile-accuracy"
    assert [p.name for p in root.iterdir() if p.is_dir()] == ["test_model.py__test_relu"]


# --- where a graph comes from -----------------------------------------------------------------


@contextlib.contextmanager
def library_context() -> Iterator[None]:
    yield


def test_the_graph_location_skips_python_own_frames_such_as_contextlib() -> None:
    # As Inductor under options= or mode=: the function it runs is wrapped by a context manager.
    wrapped = library_context()(user_frame)
    line = inspect.currentframe().f_lineno + 1  # type: ignore[union-attr]
    where = wrapped()
    assert where.endswith(
        f"test_bug_classes.py:{line} (test_the_graph_location_skips_python_own_frames_such_as_contextlib)"
    )
