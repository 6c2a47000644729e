"""The Triton path on a CUDA device: skipped cleanly where no GPU is visible."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch
from models import sin_relu_cos

from pytest_torchcompile.checking.masked import ProbeChildren
from pytest_torchcompile.checking.model import check_model
from pytest_torchcompile.common.kinds import FailureKind
from pytest_torchcompile.common.leaves import LeafResult
from pytest_torchcompile.common.settings import CheckOptions
from pytest_torchcompile.common.verdict import Status
from pytest_torchcompile.judging.judge import GraphVerdict
from pytest_torchcompile.judging.tensor_comparison import compare_tensor

pytest_plugins = ["pytester"]

SUITE = """
import pytest, torch

BUG = {{"triton.inject_relu_bug_TESTING_ONLY": {bug!r}}}


@pytest.mark.inductor_repro(inductor_config=BUG)
def test_mlp_cuda(compile_accuracy):
    torch.manual_seed(0)
    layers = []
    for index in range(6):
        layers += [torch.nn.Linear(32, 32), torch.nn.ReLU() if index == 3 else torch.nn.Tanh()]
    model = torch.nn.Sequential(*layers).eval().cuda()
    compile_accuracy(model, torch.randn(16, 32, device="cuda"))
"""


@pytest.mark.cuda
@pytest.mark.parametrize(
    ("bug", "status"),
    [
        ("accuracy", "fail_accuracy"),
        ("compile_error", "fail_compile"),
        ("runtime_error", "fail_runtime"),
    ],
)
def test_triton_bug_gives_repro_and_minified_repro(
    pytester: pytest.Pytester, bug: str, status: str
) -> None:
    pytester.makepyfile(test_gpu=SUITE.format(bug=bug))
    # A device-side assert leaves the GPU unusable to the process it hit: that run gets its own.
    run_pytest = pytester.runpytest_subprocess if bug == "runtime_error" else pytester.runpytest
    result = run_pytest("--compile-accuracy")
    result.assert_outcomes(failed=1)
    # The minify phase prints its line before pytest lists the failures.
    result.stdout.fnmatch_lines(["minified *test_mlp_cuda: * -> 1 ops*"])
    result.stdout.fnmatch_lines([f"*compile accuracy: {status}*"])
    (case,) = (pytester.path / ".compile-accuracy").glob("*test_mlp_cuda*/")
    for name in ("repro.py", "minified.py"):
        run = subprocess.run(
            [sys.executable, str(case / name)], capture_output=True, text=True, timeout=600
        )
        assert run.returncode == 1, f"{name}: {run.stdout}{run.stderr}"
        assert "cuda" in (case / name).read_text()
    kernels = list(case.glob("minified_kernel*"))
    if bug == "compile_error":
        assert not kernels, "a graph that fails to compile has no generated code"
    else:
        assert kernels and "@triton.jit" in kernels[0].read_text(), (
            "the Triton kernel it minified to, beside it"
        )
    minified = (case / "minified.py").read_text()
    assert "the full form, not the compact one" not in minified and len(minified.splitlines()) <= 80
    assert "on CUDA" in (case / "bug_report.md").read_text().splitlines()[0]


@pytest.mark.cuda
def test_a_device_side_error_is_contained_and_named(pytester: pytest.Pytester) -> None:
    """A device-side assert leaves the test process's GPU unusable for good: the failing test
    still gets its repro (from host copies) and its minified repro (made in a fresh process),
    and a later CUDA test fails with a message naming the culprit, not a bare CUDA error."""
    pytester.makepyfile(
        test_gpu=SUITE.format(bug="runtime_error")
        + """

def test_innocent(compile_accuracy):
    compile_accuracy(torch.nn.Linear(8, 8).cuda(), torch.randn(4, 8, device="cuda"))
"""
    )
    # A process of its own: the device-side assert leaves the GPU unusable to the process it hit.
    result = pytester.runpytest_subprocess("--compile-accuracy", "-p", "no:xdist")
    result.assert_outcomes(failed=2)
    shown = " ".join(result.stdout.str().split())  # messages are wrapped to the terminal's width
    assert (
        "compile accuracy: fail_runtime: " in shown
        and "device-side error: the device is unusable" in shown
    )
    assert "the device-side error in test_gpu.py::test_mlp_cuda left the device unusable" in shown
    result.stdout.fnmatch_lines(["minified *test_mlp_cuda: * -> 1 ops*"])
    (case,) = (pytester.path / ".compile-accuracy").glob("*test_mlp_cuda*/")
    for name in ("repro.py", "minified.py"):
        run = subprocess.run(
            [sys.executable, str(case / name)], capture_output=True, text=True, timeout=600
        )
        assert run.returncode == 1, f"{name}: {run.stdout}{run.stderr}"


@pytest.mark.cuda
def test_parallel_minify_shares_one_gpu(pytester: pytest.Pytester) -> None:
    tests = "\n".join(
        f"@pytest.mark.inductor_repro(inductor_config=BUG)\n"
        f"def test_case_{i}(compile_accuracy):\n"
        f"    torch.manual_seed({i})\n"
        f"    model = torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.ReLU()).cuda()\n"
        f"    compile_accuracy(model, torch.randn(8, 16, device='cuda'))\n"
        for i in range(4)
    )
    pytester.makepyfile(test_gpu=SUITE.format(bug="accuracy") + "\n\n" + tests)
    result = pytester.runpytest_subprocess(
        "--compile-accuracy", "-n", "4"
    )  # xdist: processes of its own
    result.assert_outcomes(failed=5)
    minified = sorted((pytester.path / ".compile-accuracy").glob("*/minified.py"))
    assert len(minified) == 5
    assert len([line for line in result.outlines if line.startswith("minified ")]) == 5


@pytest.mark.cuda
def test_a_probe_compiled_in_a_child_finds_a_masked_triton_bug(
    child_verdicts: list[GraphVerdict], probe_children: ProbeChildren
) -> None:
    x = torch.randn(16, 32, device="cuda")
    options = CheckOptions(inductor_config={"triton.inject_relu_bug_TESTING_ONLY": "accuracy"})
    outcome = check_model(sin_relu_cos, (x,), options=options, probe_children=probe_children)
    assert (
        outcome.status is Status.FAIL_ACCURACY and "intermediate 'relu' deviates" in outcome.message
    )
    assert [verdict.failure for verdict in child_verdicts] == [FailureKind.ACCURACY]
    assert check_model(sin_relu_cos, (x,), probe_children=probe_children).status is Status.PASS
    assert [verdict.failure for verdict in child_verdicts] == [FailureKind.ACCURACY, None]


def _deviations() -> dict[str, tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
    """(compiled, eager, fp64 reference) on the host, one case per rule of the oracle."""
    torch.manual_seed(0)
    reference = torch.randn(64, 64, dtype=torch.float64) * 100
    eager = (reference + 1e-3 * torch.randn_like(reference)).float()
    overflowed = eager.clone()
    overflowed[3, 5] = float("inf")
    return {
        "allclose": (eager + 1e-6, eager, reference),
        "rmse pass": (reference.float() + 1e-3 * torch.randn(64, 64), eager, reference),
        "rmse fail": (reference.float() + 1e-1 * torch.randn(64, 64), eager, reference),
        "eager overflowed, compiled right": (reference.float(), overflowed, reference),
        "compiled overflowed": (overflowed, eager, reference),
    }


def _verdict(leaf: LeafResult) -> tuple[object, ...]:
    return leaf.passed, leaf.rule, leaf.max_error_index


@pytest.mark.cuda
@pytest.mark.parametrize("case", list(_deviations()))
def test_an_output_on_the_gpu_is_judged_there_as_on_the_host(case: str) -> None:
    compiled, eager, reference = _deviations()[case]
    host = compare_tensor("out", compiled, eager, reference, 1e-4)
    gpu = compare_tensor("out", compiled.cuda(), eager.cuda(), reference.cuda(), 1e-4)
    assert _verdict(gpu) == _verdict(host)
    for name in ("rmse_compiled", "rmse_eager", "max_abs_error"):
        expected = getattr(host, name)
        assert getattr(gpu, name) == (
            expected if expected is None else pytest.approx(expected, rel=1e-9)
        )
    assert host.passed is (case in ("allclose", "rmse pass", "eager overflowed, compiled right"))
