"""pytester runs of whole suites under --compile-accuracy."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

SUITE = """
import torch
import pytest

BUG = {bug!r}


@pytest.fixture(autouse=True)
def _inject_bug(monkeypatch):
    import torch._inductor.config as config
    if BUG:
        monkeypatch.setattr(config.cpp, "inject_relu_bug_TESTING_ONLY", BUG)


def test_mlp(compile_accuracy):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
    out = compile_accuracy(model, torch.randn(4, 8))
    assert out.shape == (4, 4)
"""


def repro_files(pytester: pytest.Pytester, name: str) -> list[Path]:
    return sorted((pytester.path / ".compile-accuracy").glob(f"*/{name}"))


@pytest.mark.parametrize("bug", ["accuracy", "compile_error", "runtime_error"])
def test_injected_bug_fails_with_table_and_repro(pytester: pytest.Pytester, bug: str) -> None:
    pytester.makepyfile(test_model=SUITE.format(bug=bug))
    result = pytester.runpytest("--compile-accuracy", "--no-compile-minify")
    result.assert_outcomes(failed=1)
    status = {"accuracy": "fail_accuracy", "compile_error": "fail_compile", "runtime_error": "fail_runtime"}[bug]
    result.stdout.fnmatch_lines([f"*compile accuracy: {status}*", "*repro: *repro.py", "*rerun: python *repro.py"])
    if bug == "accuracy":
        result.stdout.fnmatch_lines(["*output*rmse(comp,fp64)*rmse(eager,fp64)*ratio*", "*out*fp64 rmse FAIL*"])
    (repro,) = repro_files(pytester, "repro.py")
    run = subprocess.run([sys.executable, str(repro)], capture_output=True, text=True, timeout=300)
    assert run.returncode == 1, run.stdout + run.stderr
    assert "REPRODUCED" in run.stdout


def test_repro_collects_as_marked_test(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_model=SUITE.format(bug="accuracy"))
    pytester.runpytest("--compile-accuracy", "--no-compile-minify")
    (repro,) = repro_files(pytester, "repro.py")
    result = pytester.runpytest(str(repro), "--strict-markers", "-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*REPRODUCED*"])


@pytest.mark.parametrize("flags", [["--compile-accuracy"], []], ids=["checked", "flag-off"])
def test_passes_without_bug_or_without_flag(pytester: pytest.Pytester, flags: list[str]) -> None:
    bug = None if flags else "accuracy"
    pytester.makepyfile(test_model=SUITE.format(bug=bug))
    result = pytester.runpytest(*flags)
    result.assert_outcomes(passed=1)
    assert repro_files(pytester, "repro.py") == []


def test_options_are_documented(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest("--help")
    result.stdout.fnmatch_lines(["*--compile-accuracy *", "*--compile-accuracy-dir*", "*--compile-backend*",
                                 "*--compile-mode*", "*--no-compile-minify*", "*--compile-minify-timeout*"])
    markers = pytester.runpytest("--markers")
    markers.stdout.fnmatch_lines(["@pytest.mark.inductor_repro(*"])


def test_eager_exception_errors_the_test_with_its_own_traceback(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_model="""
        import torch

        def broken(x):
            raise ValueError("shape bug in the model")

        def test_broken(compile_accuracy):
            compile_accuracy(broken, torch.randn(2))
    """)
    result = pytester.runpytest("--compile-accuracy")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*ValueError: shape bug in the model*"])
    result.stdout.no_fnmatch_line("*fail_accuracy*")


def test_option_precedence_call_over_marker_over_cli_over_ini(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\ncompile_accuracy_tol = 0.1\ncompile_mode = max-autotune\n")
    pytester.makepyfile(test_model="""
        import pytest

        def test_ini_and_cli(compile_accuracy):
            assert compile_accuracy.settings().tol == 0.2
            assert compile_accuracy.settings().mode == "max-autotune"

        @pytest.mark.inductor_repro(tol=0.3, ignore_non_float=True)
        def test_marker(compile_accuracy):
            assert compile_accuracy.settings().tol == 0.3
            assert compile_accuracy.settings(tol=0.4).tol == 0.4
            assert compile_accuracy.settings().ignore_non_float

        def test_unknown_keyword(compile_accuracy):
            with pytest.raises(pytest.UsageError, match="unknown compile-accuracy option"):
                compile_accuracy.settings(tolerance=1)
    """)
    result = pytester.runpytest("--compile-accuracy-tol", "0.2")
    result.assert_outcomes(passed=3)


def test_repro_keeps_buffers_and_constants(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_model="""
        import pytest, torch

        class WithConstants(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.register_buffer("scale", torch.linspace(0.5, 2.0, 64).reshape(8, 8))

            def forward(self, x):
                offset = torch.tensor([0.25, -0.5, 1.0, 0.0, 0.5, -1.0, 2.0, 0.125])
                return torch.relu(x @ self.scale + offset)

        @pytest.mark.inductor_repro(inductor_config={"cpp.inject_relu_bug_TESTING_ONLY": "accuracy"})
        def test_constants(compile_accuracy):
            compile_accuracy(WithConstants(), torch.randn(4, 8))
    """)
    pytester.runpytest("--compile-accuracy", "--no-compile-minify").assert_outcomes(failed=1)
    (repro,) = repro_files(pytester, "repro.py")
    source = repro.read_text()
    assert "0.25, -0.5, 1.0, 0.0, 0.5, -1.0, 2.0, 0.125" in source
    assert list((repro.parent / "tensors").glob("*.pt")), "the 64-element buffer goes to a tensor file"
    run = subprocess.run([sys.executable, str(repro)], capture_output=True, text=True, timeout=300)
    assert run.returncode == 1, run.stdout + run.stderr
    cli = subprocess.run([sys.executable, "-m", "pytest_torchcompile", "minify", str(repro), "--no-isolate"],
                         capture_output=True, text=True, timeout=300)
    assert cli.returncode == 0, cli.stdout + cli.stderr
    assert "-> 1 ops" in cli.stdout
    minified = repro.parent / "minified.py"
    assert "torch.ops.aten.relu.default" in minified.read_text()
    rerun = subprocess.run([sys.executable, str(minified)], capture_output=True, text=True, timeout=300)
    assert rerun.returncode == 1, rerun.stdout + rerun.stderr


def test_minify_command_rejects_a_missing_file() -> None:
    cli = subprocess.run([sys.executable, "-m", "pytest_torchcompile", "minify", "no/such/repro.py"],
                         capture_output=True, text=True, timeout=120)
    assert cli.returncode == 2 and "no such repro file" in cli.stderr


def test_hypothesis_failure_is_shrunk_and_written_once(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_model="""
        import pytest, torch
        from hypothesis import given, settings, strategies as st
        from pytest_torchcompile.strategies import tensors

        model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU()).eval()

        @pytest.mark.inductor_repro(inductor_config={"cpp.inject_relu_bug_TESTING_ONLY": "accuracy"})
        @settings(max_examples=5, deadline=None, database=None)
        @given(x=tensors(shape=st.tuples(st.integers(1, 16), st.just(8))))
        def test_random_batch(compile_accuracy, x):
            compile_accuracy(model, x, dynamic=True)
    """)
    result = pytester.runpytest("--compile-accuracy", "--no-compile-minify")
    result.assert_outcomes(failed=1)
    # Hypothesis shrinks the batch to one row before the failure is reported and written.
    assert "compile accuracy: fail_accuracy: 1 of 1 outputs deviate beyond the fp64 rule at input sizes [[1, 8]]" \
        in result.stdout.str()
    (repro,) = repro_files(pytester, "repro.py")
    assert repro.parent.name == "test_model.py__test_random_batch", "superseded examples leave no repro"
    result.stdout.fnmatch_lines(["compile accuracy: 1 checks in 1 tests: 1 fail_accuracy"])


def test_an_op_on_constants_alone_survives_into_the_repro(tmp_path: Path) -> None:
    import torch
    import torch.fx

    from pytest_torchcompile.repro import ReproCase, load_repro, write_repro

    graph = torch.fx.Graph()
    x = graph.placeholder("x")
    constant = graph.get_attr("_tensor_constant0")
    relu = graph.call_function(torch.ops.aten.relu.default, (constant,))
    graph.output((graph.call_function(torch.ops.aten.add.Tensor, (x, relu)),))
    root = torch.nn.Module()
    root.register_buffer("_tensor_constant0", torch.linspace(-1, 1, 64))
    path = write_repro(ReproCase(torch.fx.GraphModule(root, graph), [torch.zeros(64)], "accuracy", "t"),
                       tmp_path / "repro.py")
    loaded = load_repro(path).case.gm
    assert torch.ops.aten.relu.default in [n.target for n in loaded.graph.nodes]


def test_host_copies_are_written_back_on_their_recorded_device() -> None:
    """A device-side error leaves a device unreadable, so a failing call's inputs and constants
    are copied to host memory first; the repro still puts them on the device they came from."""
    import torch
    import torch.fx

    from pytest_torchcompile.capture import HostTensor, copy_to_host
    from pytest_torchcompile.repro import ReproCase, render_repro

    graph = torch.fx.Graph()
    x = graph.placeholder("x")
    constant = graph.get_attr("_tensor_constant0")
    graph.output((graph.call_function(torch.ops.aten.add.Tensor, (x, constant)),))
    on_cpu = torch.fx.GraphModule({"_tensor_constant0": torch.ones(4)}, graph)
    assert copy_to_host(on_cpu, [torch.zeros(4)]) is None, "nothing to copy off the host"

    recorded = torch.device("cuda", 1)
    on_host = torch.fx.GraphModule({"_tensor_constant0": HostTensor(torch.ones(4), recorded, False)}, graph)
    source, _ = render_repro(ReproCase(on_host, [HostTensor(torch.arange(4.0), recorded, True)], "runtime_error", "t"))

    assert "self.register_buffer('_tensor_constant0', _inline([1.0, 1.0, 1.0, 1.0], torch.float32, (4,), (1,), 'cuda:1', False))" in source
    assert "_inline([0.0, 1.0, 2.0, 3.0], torch.float32, (4,), (1,), 'cuda:1', True)" in source
