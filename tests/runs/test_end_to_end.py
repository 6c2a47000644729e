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
def _inject_bug():
    import torch._inductor.config as config
    with config.patch({{"cpp.inject_relu_bug_TESTING_ONLY": BUG}} if BUG else {{}}):
        yield


def test_mlp(compile_accuracy):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
    out = compile_accuracy(model, torch.randn(4, 8))
    assert out.shape == (4, 4)
"""


def repro_files(pytester: pytest.Pytester, name: str) -> list[Path]:
    return sorted((pytester.path / ".compile-accuracy").glob(f"*/{name}"))


# The error kinds run whole in the slow step; unit/checking/test_model.py gives each its status.
@pytest.mark.parametrize(
    "bug",
    [
        "accuracy",
        pytest.param("compile_error", marks=pytest.mark.slow),
        pytest.param("runtime_error", marks=pytest.mark.slow),
    ],
)
def test_injected_bug_fails_with_table_and_repro(
    pytester: pytest.Pytester, bug: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "200")  # the whole table, and paths unwrapped
    pytester.makepyfile(test_model=SUITE.format(bug=bug))
    result = pytester.runpytest("--compile-accuracy", "--no-compile-minify")
    result.assert_outcomes(failed=1)
    status = {
        "accuracy": "fail_accuracy",
        "compile_error": "fail_compile",
        "runtime_error": "fail_runtime",
    }[bug]
    result.stdout.fnmatch_lines(
        [f"*compile accuracy: {status}*", "*repro: *repro.py", "*rerun: python *repro.py"]
    )
    if bug == "accuracy":
        result.stdout.fnmatch_lines(
            ["*output*rmse(comp,fp64)*rmse(eager,fp64)*ratio*", "*out*fp64 rmse FAIL*"]
        )
    (repro,) = repro_files(pytester, "repro.py")
    run = subprocess.run([sys.executable, str(repro)], capture_output=True, text=True, timeout=300)
    assert run.returncode == 1, run.stdout + run.stderr
    assert "REPRODUCED" in run.stdout


@pytest.mark.slow
def test_repro_collects_as_marked_test(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_model=SUITE.format(bug="accuracy"))
    pytester.runpytest("--compile-accuracy", "--no-compile-minify")
    (repro,) = repro_files(pytester, "repro.py")
    # A process of its own: a repro sets the Inductor config of the process that imports it.
    result = pytester.runpytest_subprocess(str(repro), "--strict-markers", "-p", "no:cacheprovider")
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
    result.stdout.fnmatch_lines(
        [
            "*--compile-accuracy *",
            "*--compile-accuracy-dir*",
            "*--compile-accuracy-backend*",
            "*--compile-accuracy-mode*",
            "*--no-compile-accuracy-minify*",
            "*--compile-accuracy-minify-timeout*",
        ]
    )
    markers = pytester.runpytest("--markers")
    markers.stdout.fnmatch_lines(["@pytest.mark.inductor_repro(*"])


def test_eager_exception_errors_the_test_with_its_own_traceback(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_model="""
        import torch

        def broken(x):
            raise ValueError("shape bug in the model")

        def test_broken(compile_accuracy):
            compile_accuracy(broken, torch.randn(2))
    """
    )
    result = pytester.runpytest("--compile-accuracy")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*ValueError: shape bug in the model*"])
    result.stdout.no_fnmatch_line("*fail_accuracy*")


def test_option_precedence_call_over_marker_over_cli_over_ini(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\ncompile_accuracy_tol = 0.1\ncompile_mode = max-autotune\n")
    pytester.makepyfile(
        test_model="""
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
    """
    )
    result = pytester.runpytest("--compile-accuracy-tol", "0.2")
    result.assert_outcomes(passed=3)


@pytest.mark.slow
def test_repro_keeps_buffers_and_constants(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_model="""
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
    """
    )
    pytester.runpytest("--compile-accuracy", "--no-compile-minify").assert_outcomes(failed=1)
    (repro,) = repro_files(pytester, "repro.py")
    source = repro.read_text()
    assert "0.25, -0.5, 1.0, 0.0, 0.5, -1.0, 2.0, 0.125" in source
    assert list((repro.parent / "tensors").glob("*.pt")), (
        "the 64-element buffer goes to a tensor file"
    )
    run = subprocess.run([sys.executable, str(repro)], capture_output=True, text=True, timeout=300)
    assert run.returncode == 1, run.stdout + run.stderr
    cli = subprocess.run(
        [sys.executable, "-m", "pytest_torchcompile", "minify", str(repro), "--no-isolate"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert cli.returncode == 0, cli.stdout + cli.stderr
    assert "-> 1 ops" in cli.stdout
    minified = repro.parent / "minified.py"
    assert "torch.ops.aten.relu.default" in minified.read_text()
    rerun = subprocess.run(
        [sys.executable, str(minified)], capture_output=True, text=True, timeout=300
    )
    assert rerun.returncode == 1, rerun.stdout + rerun.stderr


def test_minify_command_rejects_a_missing_file() -> None:
    cli = subprocess.run(
        [sys.executable, "-m", "pytest_torchcompile", "minify", "no/such/repro.py"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert cli.returncode == 2 and "no such repro file" in cli.stderr


@pytest.mark.slow  # shrinks over many shapes, a compile each; test_hypothesis_examples.py is its twin
def test_hypothesis_failure_is_shrunk_and_written_once(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_model="""
        import pytest, torch
        from hypothesis import given, settings, strategies as st
        from pytest_torchcompile.strategies import tensors

        model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU()).eval()

        @pytest.mark.inductor_repro(inductor_config={"cpp.inject_relu_bug_TESTING_ONLY": "accuracy"})
        @settings(max_examples=5, deadline=None, database=None)
        @given(x=tensors(shape=st.tuples(st.integers(1, 16), st.just(8))))
        def test_random_batch(compile_accuracy, x):
            compile_accuracy(model, x, dynamic=True)
    """
    )
    result = pytester.runpytest("--compile-accuracy", "--no-compile-minify")
    result.assert_outcomes(failed=1)
    # Hypothesis shrinks the batch to one row before the failure is reported and written.
    assert (
        "compile accuracy: fail_accuracy: 1 of 1 outputs deviate beyond the fp64 rule at input sizes [[1, 8]]"
        in " ".join(result.stdout.str().split())
    )
    (repro,) = repro_files(pytester, "repro.py")
    assert repro.parent.name == "test_model.py__test_random_batch", (
        "superseded examples leave no repro"
    )
    result.stdout.fnmatch_lines(["compile accuracy: 1 check in 1 test: 1 fail_accuracy"])


def test_an_op_on_constants_alone_survives_into_the_repro(tmp_path: Path) -> None:
    import torch
    import torch.fx

    from pytest_torchcompile.judging.case import ReproCase
    from pytest_torchcompile.repros.loading import load_repro
    from pytest_torchcompile.repros.repro import write_repro

    graph = torch.fx.Graph()
    x = graph.placeholder("x")
    constant = graph.get_attr("_tensor_constant0")
    relu = graph.call_function(torch.ops.aten.relu.default, (constant,))
    graph.output((graph.call_function(torch.ops.aten.add.Tensor, (x, relu)),))
    root = torch.nn.Module()
    root.register_buffer("_tensor_constant0", torch.linspace(-1, 1, 64))
    path = write_repro(
        ReproCase(torch.fx.GraphModule(root, graph), [torch.zeros(64)], "accuracy", "t"),
        tmp_path / "repro.py",
    )
    loaded = load_repro(path).case.gm
    assert torch.ops.aten.relu.default in [n.target for n in loaded.graph.nodes]


def test_host_copies_are_written_back_on_their_recorded_device() -> None:
    """A device-side error leaves a device unreadable, so a failing call's inputs and constants
    are copied to host memory first; the repro still puts them on the device they came from."""
    import torch
    import torch.fx

    from pytest_torchcompile.judging.case import ReproCase
    from pytest_torchcompile.judging.host_copy import HostTensor, copy_to_host
    from pytest_torchcompile.repros.rendering import render_repro

    graph = torch.fx.Graph()
    x = graph.placeholder("x")
    constant = graph.get_attr("_tensor_constant0")
    graph.output((graph.call_function(torch.ops.aten.add.Tensor, (x, constant)),))
    on_cpu = torch.fx.GraphModule({"_tensor_constant0": torch.ones(4)}, graph)
    assert copy_to_host(on_cpu, [torch.zeros(4)]) is None, "nothing to copy off the host"

    recorded = torch.device("cuda", 1)
    on_host = torch.fx.GraphModule(
        {"_tensor_constant0": HostTensor(torch.ones(4), recorded, False)}, graph
    )
    source, _ = render_repro(
        ReproCase(on_host, [HostTensor(torch.arange(4.0), recorded, True)], "runtime_error", "t")
    )

    assert (
        "self.register_buffer('_tensor_constant0', _inline([1.0, 1.0, 1.0, 1.0], torch.float32, (4,), (1,), 'cuda:1', False))"
        in source
    )
    assert "_inline([0.0, 1.0, 2.0, 3.0], torch.float32, (4,), (1,), 'cuda:1', True)" in source


POOL_SUITE = """
import pytest, torch

# A custom op registered by the test module itself, as a model's package would register its own.
library = torch.library.Library("e2e_pool_ops", "DEF")
library.define("double(Tensor x) -> Tensor")
library.impl("double", lambda x: x * 2, "CompositeExplicitAutograd")
library.impl("double", lambda x: torch.empty_like(x), "Meta")


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3, padding=1)
        self.pool = torch.nn.MaxPool2d(3, stride=2, padding=1)

    def forward(self, x):
        return torch.ops.e2e_pool_ops.double(self.pool(torch.relu(self.conv(x))))


@pytest.mark.inductor_repro(inductor_config={"cpp.inject_relu_bug_TESTING_ONLY": "accuracy"})
def test_block(compile_accuracy):
    torch.manual_seed(0)
    with torch.no_grad():
        compile_accuracy(Block().eval(), torch.randn(2, 3, 8, 8))
"""


@pytest.mark.slow
def test_repro_of_maxpool_and_a_custom_op_runs_on_its_own(pytester: pytest.Pytester) -> None:
    """MaxPool2d lowers to one of Inductor's own prims, which exists only once Inductor's prims
    module is imported; the custom op exists only once the test module is: the repro imports both."""
    pytester.makepyfile(test_pool=POOL_SUITE)
    result = pytester.runpytest("--compile-accuracy")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["minified test_pool.py::test_block: * -> 1 ops in *"])
    result.stdout.no_fnmatch_line("*repro is broken*")
    (repro,) = repro_files(pytester, "repro.py")
    source = repro.read_text()
    assert (
        "prims._low_memory_max_pool_with_offsets" in source
        and "torch._inductor.inductor_prims" in source
    )
    assert "and test_pool for the ops it registers" in source
    for path in (repro, repro.with_name("minified.py")):
        # From the repro's own directory, where the test module is not importable by default.
        run = subprocess.run(
            [sys.executable, str(path)],
            capture_output=True,
            text=True,
            timeout=300,
            cwd=repro.parent,
        )
        assert run.returncode == 1, run.stdout + run.stderr
        assert "REPRODUCED" in run.stdout


BROKEN_OPS_MODULE = """
import torch

library = torch.library.Library("e2e_vanishing_ops", "DEF")
library.define("triple(Tensor x) -> Tensor")
library.impl("triple", lambda x: x * 3, "CompositeExplicitAutograd")
"""


@pytest.mark.slow
def test_a_repro_that_cannot_run_exits_3_and_never_reads_reproduced(
    pytester: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import torch
    import torch.fx

    from pytest_torchcompile.judging.case import ReproCase
    from pytest_torchcompile.repros.repro import write_repro

    (pytester.path / "vanishing_ops.py").write_text(BROKEN_OPS_MODULE)
    monkeypatch.syspath_prepend(str(pytester.path))
    __import__("vanishing_ops")
    graph = torch.fx.Graph()
    x = graph.placeholder("x")
    graph.output((graph.call_function(torch.ops.e2e_vanishing_ops.triple.default, (x,)),))
    repro = write_repro(
        ReproCase(torch.fx.GraphModule(torch.nn.Module(), graph), [torch.ones(4)], "accuracy", "t"),
        pytester.path / "case" / "repro.py",
    )
    (pytester.path / "vanishing_ops.py").unlink()  # the module that registered the op is gone

    run = subprocess.run([sys.executable, str(repro)], capture_output=True, text=True, timeout=300)
    assert run.returncode == 3, run.stdout + run.stderr
    assert (
        "REPRO BROKEN: op torch.ops.e2e_vanishing_ops.triple is registered by module vanishing_ops"
        in run.stdout
    )

    as_test = pytester.runpytest_subprocess(
        str(repro), "--compile-accuracy", "-p", "no:cacheprovider"
    )
    as_test.assert_outcomes(failed=1)
    as_test.stdout.fnmatch_lines(["*REPRO BROKEN: op torch.ops.e2e_vanishing_ops.triple*"])
    as_test.stdout.no_fnmatch_line("*REPRODUCED*")
    as_test.stdout.no_fnmatch_line("*fail_accuracy*")

    cli = subprocess.run(
        [sys.executable, "-m", "pytest_torchcompile", "minify", str(repro), "--no-isolate"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert cli.returncode == 3, cli.stdout + cli.stderr
    assert (
        f"not minified {repro}: the repro is broken: op torch.ops.e2e_vanishing_ops.triple"
        in cli.stdout
    )


def test_a_repro_that_cannot_run_is_reported_at_its_test_and_not_minified(
    pytester: pytest.Pytester,
) -> None:
    pytester.makeconftest("""
        import pytest_torchcompile.repros.repro as repro

        render = repro.render_repro

        def render_with_a_defect(case):
            source, tensors = render(case)
            defect = "def make_inputs():\\n    raise RuntimeError('simulated renderer defect')\\n"
            return source.replace("def make_inputs():\\n", defect), tensors

        repro.render_repro = render_with_a_defect
    """)
    pytester.makepyfile(test_model=SUITE.format(bug="accuracy"))
    # A process of its own: the conftest replaces the renderer of the process it runs in.
    result = pytester.runpytest_subprocess("--compile-accuracy")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*compile accuracy: fail_accuracy*",
            "repro: *",
            "the repro is broken, a defect of pytest-torchcompile (please report it):*",
            "*cannot be built: RuntimeError: simulated renderer defect",
        ]
    )
    result.stdout.no_fnmatch_line("rerun: python*")
    result.stdout.no_fnmatch_line("*minified test_model.py*")
    assert repro_files(pytester, "minified.py") == []


def test_minify_progress_is_plain_lines_off_a_terminal(capsys: pytest.CaptureFixture[str]) -> None:
    from pytest_torchcompile.cli import ProgressLine
    from pytest_torchcompile.common.results import MinifyProgress

    progress = ProgressLine(sys.stderr)
    for compiles in range(3):
        progress(MinifyProgress("case", 10 - compiles, compiles, 0.5 * compiles))
    progress.close()
    shown = capsys.readouterr().err
    assert "\r" not in shown
    assert shown == "minifying: 10 ops left, 0 compiles, 0.0 s\n", (
        "later lines wait for PROGRESS_EVERY_S"
    )


@pytest.mark.slow
def test_a_repro_with_many_outputs_shows_the_failing_and_the_worst_few(tmp_path: Path) -> None:
    import os

    import torch
    from torch.fx.experimental.proxy_tensor import make_fx

    from pytest_torchcompile.judging.case import ReproCase
    from pytest_torchcompile.repros.repro import write_repro

    def many_outputs(x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return (torch.relu(x), *(torch.sin(x) * scale for scale in range(1, 12)))

    inputs = [torch.randn(16)]
    config = "torch._inductor.config.cpp.inject_relu_bug_TESTING_ONLY = 'accuracy'"
    repro = write_repro(
        ReproCase(make_fx(many_outputs)(*inputs), inputs, "accuracy", "t", config_source=config),
        tmp_path / "repro.py",
    )

    def rows(environment: dict[str, str]) -> tuple[list[str], str]:
        run = subprocess.run(
            [sys.executable, str(repro)],
            capture_output=True,
            text=True,
            timeout=300,
            env={**os.environ, **environment},
        )
        assert run.returncode == 1, run.stdout + run.stderr
        return [
            line for line in run.stdout.splitlines() if line.startswith("graph_out[")
        ], run.stdout

    summarized, output = rows({})
    assert len(summarized) == 6 and "graph_out[0]" in summarized[0] and "FAIL" in summarized[0]
    assert "(6 more outputs pass; PYTEST_TORCHCOMPILE_FULL_TABLE=1 shows every row)" in output
    full, output = rows({"PYTEST_TORCHCOMPILE_FULL_TABLE": "1"})
    assert len(full) == 12 and "more outputs pass" not in output
