"""Third-party suites as they are: global torch flags, warnings filters, logging, random ops."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

pytest_plugins = ["pytester"]


FROZEN_FLAGS_SUITE = """
import torch

# What torch.testing._internal.common_utils does on import.
torch.backends.disable_global_flags()


def test_plain():
    assert torch.ones(2).sum() == 2


def test_fixture(compile_accuracy):
    compile_accuracy(torch.nn.Linear(4, 3), torch.randn(2, 4))
"""


def test_frozen_global_flags_do_not_fail_tests(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_frozen=FROZEN_FLAGS_SUITE)
    # A process of its own: the suite freezes torch's global flags for the rest of the process.
    result = pytester.runpytest_subprocess("--compile-accuracy", "--no-compile-minify")
    result.assert_outcomes(passed=2)


PRECISION_STATE = """
import torch

def state():
    read = torch._C._get_fp32_precision_getter
    values = {f"{backend}.{op}": read(backend, op) for backend, op in
              [("generic", "all"), ("cuda", "all"), ("cuda", "matmul"), ("cuda", "conv"),
               ("cuda", "rnn"), ("mkldnn", "matmul")]}
    for name, legacy in [("float32_matmul_precision", torch.get_float32_matmul_precision),
                         ("cublas_allow_tf32", lambda: torch.backends.cuda.matmul.allow_tf32),
                         ("cudnn_allow_tf32", lambda: torch.backends.cudnn.allow_tf32)]:
        try:
            values[name] = legacy()
        except RuntimeError:  # the legacy and per-operation TF32 APIs disagree
            values[name] = "unreadable"
    return values
"""


@pytest.mark.parametrize(
    "setup",
    [
        "pass",
        "torch.backends.disable_global_flags()",
        "torch.backends.disable_global_flags(); torch.set_float32_matmul_precision('medium')",
        "torch.backends.cuda.matmul.allow_tf32 = True; torch.backends.cudnn.allow_tf32 = False",
        "torch.backends.fp32_precision = 'tf32'",
        "torch.backends.fp32_precision = 'ieee'",
        "torch.backends.disable_global_flags(); torch.backends.cuda.matmul.fp32_precision = 'tf32'",
        "torch.backends.cudnn.conv.fp32_precision = 'ieee'",
    ],
)
def test_full_fp32_precision_turns_tf32_off_and_restores_every_flag(setup: str) -> None:
    """Whatever API a program set its TF32 flags with, and frozen or not: inside, no TF32 and no
    legacy flag newly unreadable (Inductor reads them); after, every flag as it was."""
    script = PRECISION_STATE + textwrap.dedent(f"""
        import warnings
        from pytest_torchcompile.judging.precision import full_fp32_precision

        {setup}
        warnings.simplefilter("error")
        before = state()
        with full_fp32_precision():
            inside = state()
        assert state() == before, (before, state())
        assert inside["cuda.matmul"] == inside["mkldnn.matmul"] == "ieee", inside
        assert inside["cuda.conv"] != "tf32" and inside["cublas_allow_tf32"] is False, inside
        assert inside["cudnn_allow_tf32"] in (False, "unreadable"), inside
        newly_unreadable = [k for k, v in inside.items() if v == "unreadable" != before[k]]
        assert not newly_unreadable, (before, inside)
    """)
    run = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert run.returncode == 0, run.stderr


def test_an_interception_made_as_the_compiler_is_imported_leaves_imports_as_they_were() -> None:
    """Where Inductor is not imported yet, the compile that imports it is intercepted; after
    the block, Inductor's entry point, its module's loader and the import machinery are as they
    would have been."""
    script = textwrap.dedent("""
        import sys, torch
        from pytest_torchcompile.torch_internals import interception
        from pytest_torchcompile.torch_internals.interception import intercept_inductor

        assert "torch._inductor.compile_fx" not in sys.modules
        graphs = []

        def hook(gm, inputs, kwargs, compile_inner):
            graphs.append(gm)
            return compile_inner()

        with intercept_inductor(hook):
            torch.compile(lambda x: x.sin() + 1)(torch.randn(4))
        import torch._inductor.compile_fx as compile_fx_module

        assert len(graphs) == 1, graphs
        assert compile_fx_module.compile_fx.__qualname__ == "compile_fx", compile_fx_module.compile_fx
        assert type(compile_fx_module.__loader__).__name__ == "SourceFileLoader", compile_fx_module.__loader__
        assert compile_fx_module.__spec__.loader is compile_fx_module.__loader__
        assert not [f for f in sys.meta_path if type(f).__module__ == interception.__name__], sys.meta_path
    """)
    run = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=300
    )
    assert run.returncode == 0, run.stderr


LAZY_COMPILER_SUITE = """
import sys, pytest, torch


def test_compiles_nothing():
    assert "torch._dynamo" not in sys.modules


def double_relu(x):
    return torch.relu(x) * 2


compiled = []


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_first_compile_imports_the_compiler():
    compiled.append(torch.compile(double_relu))
    import torch._inductor.config as config
    with config.patch({"cpp.inject_relu_bug_TESTING_ONLY": "accuracy"}):
        compiled[0](torch.randn(8))


def test_compiles_cleanly():
    assert compiled[0](torch.ones(4)).sum() == 8


@pytest.mark.inductor_repro(inductor_config={"cpp.inject_relu_bug_TESTING_ONLY": "accuracy"})
def test_reuses_compiled_code():
    compiled[0](torch.randn(4))
"""


@pytest.mark.slow
def test_tests_that_compile_nothing_see_no_compiler(pytester: pytest.Pytester) -> None:
    """The plugin does not import the compiler for a test that compiles nothing (it takes
    seconds, and its deprecation warnings would fail the test under -W error); the graphs of a
    test whose own ``torch.compile`` imports it are still checked, and so is code an earlier
    test compiled."""
    pytester.makepyfile(test_suite=LAZY_COMPILER_SUITE)
    result = pytester.runpytest_subprocess(
        "--compile-accuracy",
        "--no-compile-minify",
        "-W",
        "error::DeprecationWarning",
        "-p",
        "no:cacheprovider",
    )
    result.assert_outcomes(passed=2, failed=2)
    result.stdout.fnmatch_lines(
        ["*FAILED*test_first_compile_imports_the_compiler*", "*FAILED*test_reuses_compiled_code*"]
    )
    result.stdout.no_fnmatch_line("*script_method*")


TORCH_SEEN_CONFTEST = """
import os, sys


def pytest_sessionfinish(session):
    role = "worker" if hasattr(session.config, "workerinput") else "controller"
    with open(f"{role}-{os.getpid()}.torch", "w") as out:
        out.write(str("torch" in sys.modules))
"""


@pytest.mark.parametrize(
    ("suite", "args", "seen"),
    [
        ("def test_plain():\n    assert 1 + 1 == 2\n", [], {"controller": "False"}),
        # A mode is checked against torch's only where models are checked.
        (
            "def test_plain():\n    assert 1 + 1 == 2\n",
            ["--compile-accuracy-mode", "max-autotun", "--compile-accuracy-backend", "inductr"],
            {"controller": "False"},
        ),
        pytest.param(
            "import torch\n\ndef test_plain():\n    assert torch.ones(1).item() == 1\n",
            ["--compile-accuracy", "-n", "2"],
            {"controller": "False", "worker": "True"},
            marks=pytest.mark.slow,
        ),  # xdist; the "off" run stays in the default run
    ],
    ids=["off", "off-naming-a-mode", "xdist-controller"],
)
def test_the_plugin_imports_torch_only_where_tests_are_checked(
    pytester: pytest.Pytester, suite: str, args: list[str], seen: dict[str, str]
) -> None:
    """Importing torch takes seconds: a run without the option and an xdist controller (which
    runs no test) do not pay it for the plugin."""
    pytester.makeconftest(TORCH_SEEN_CONFTEST)
    pytester.makepyfile(test_suite=suite)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", *args)
    assert result.ret == 0, result.stdout.str()
    found = {path.name.split("-")[0]: path.read_text() for path in pytester.path.glob("*.torch")}
    assert found == seen


TRACE_LOG_SUITE = """
import torch


def test_compiles_then_fails():
    torch.compile(lambda x: x.sin() + 1)(torch.randn(4))
    assert False
"""


def test_torch_trace_log_stays_out_of_captured_logs_unless_asked(pytester: pytest.Pytester) -> None:
    """Asked, the run captures what pytest alone captures: pytest 9.2 takes the trace logger's
    DEBUG records into a failing test's report, pytest 9.0 none."""
    pytester.makepyfile(test_trace=TRACE_LOG_SUITE)
    unchecked = pytester.runpytest("-p", "no:cacheprovider")
    unchecked.assert_outcomes(failed=1)
    pytest_captures_it = any("torch.__trace" in line for line in unchecked.stdout.lines)
    quiet = pytester.runpytest(
        "--compile-accuracy", "--no-compile-minify", "-p", "no:cacheprovider"
    )
    quiet.assert_outcomes(failed=1)
    quiet.stdout.no_fnmatch_line("*torch.__trace*")
    asked = pytester.runpytest(
        "--compile-accuracy",
        "--no-compile-minify",
        "-p",
        "no:cacheprovider",
        "--compile-accuracy-trace-log",
    )
    asked.assert_outcomes(failed=1)
    if pytest_captures_it:
        asked.stdout.fnmatch_lines(["*DEBUG*torch.__trace*"])
    else:
        asked.stdout.no_fnmatch_line("*torch.__trace*")


DROPOUT_SUITE = """
import pytest, torch


def model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.Dropout(0.3), torch.nn.ReLU(),
                               torch.nn.Linear(32, 4)).train()


def test_training_with_dropout(compile_accuracy):
    compile_accuracy(model(), torch.randn(8, 16), backward=True)


@pytest.mark.inductor_repro(inductor_config={"cpp.inject_relu_bug_TESTING_ONLY": "accuracy"})
def test_miscompiled_after_rand(compile_accuracy):
    compile_accuracy(lambda x: torch.relu(x * torch.rand_like(x) - 0.2), torch.randn(64))
"""


def _run_with_report(
    pytester: pytest.Pytester, suite: str
) -> tuple[pytest.RunResult, dict[str, list[dict]]]:
    """Run ``suite`` under --compile-accuracy; the checks of its JSON report, by test name."""
    pytester.makepyfile(test_suite=suite)
    result = pytester.runpytest(
        "--compile-accuracy",
        "--no-compile-minify",
        "-p",
        "no:cacheprovider",
        "--compile-accuracy-report",
        "report.json",
    )
    checks: dict[str, list[dict]] = {}
    for test in json.loads((pytester.path / "report.json").read_text())["tests"]:
        checks[test["nodeid"].split("::")[-1]] = test["checks"]
    return result, checks


@pytest.mark.slow  # its plain twin below stays in the default run
def test_random_ops_are_judged_with_eagers_numbers(pytester: pytest.Pytester) -> None:
    """Dropout in train mode is checked, not eager_nondeterministic; torch.rand, which draws other
    numbers in fp64, is replayed there, so a miscompiled op after it is still caught."""
    result, checks = _run_with_report(pytester, DROPOUT_SUITE)
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*compile accuracy: fail_accuracy:*", "*fallback_random=True*"])
    (dropout,) = checks["test_training_with_dropout"]
    assert dropout["status"] == "pass" and dropout["fallback_random"] is True
    assert [check["reference"] for check in checks["test_miscompiled_after_rand"]] == ["fp64"]


PLAIN_DROPOUT_SUITE = """
import pytest, torch


def model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.Dropout(0.3), torch.nn.ReLU(),
                               torch.nn.Linear(32, 4)).train()


def test_training_step_with_dropout():
    torch.compile(model())(torch.randn(8, 16)).sum().backward()


@pytest.mark.inductor_repro(inductor_config={"cpp.inject_relu_bug_TESTING_ONLY": "accuracy"})
def test_miscompiled_after_rand():
    torch.compile(lambda x: torch.relu(x * torch.rand_like(x) - 0.2))(torch.randn(64))
"""


def test_plain_compile_graphs_with_random_ops_are_judged(pytester: pytest.Pytester) -> None:
    """A plain torch.compile graph that draws random numbers is judged, not skipped: compiled with
    fallback_random, its eager references draw from the generator state its call found."""
    result, checks = _run_with_report(pytester, PLAIN_DROPOUT_SUITE)
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*fail_accuracy: * of graph 0 (*", "*fallback_random=True*"])
    failing = [
        check for check in checks["test_miscompiled_after_rand"] if check["status"] != "pass"
    ]
    assert failing and all(check["fallback_random"] for check in failing)


@pytest.mark.cuda
@pytest.mark.parametrize("backward", [False, True])
def test_cuda_dropout_is_judged_against_fp64_with_eagers_draws(backward: bool) -> None:
    """On CUDA, dropout is one fused kernel whose fp64 draws differ from fp32's: the fp64 run
    replays the mask and recomputes the output in fp64."""
    import torch

    from pytest_torchcompile.checking.model import check_model
    from pytest_torchcompile.common.settings import CheckOptions
    from pytest_torchcompile.common.verdict import Status

    torch.manual_seed(0)
    model = (
        torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.Dropout(0.3), torch.nn.GELU())
        .cuda()
        .train()
    )
    outcome = check_model(
        model, (torch.randn(32, 64, device="cuda"),), options=CheckOptions(backward=backward)
    )
    assert outcome.status is Status.PASS, outcome.message
    assert outcome.reference == "fp64" and outcome.fallback_random


def test_a_random_graph_judged_as_repros_and_the_minifier_do_draws_alike() -> None:
    """judge_graph (repro files, minifier candidates) runs a random graph's eager, fp64 and
    compiled runs from one seed, so that an unbroken graph passes, and leaves the caller's
    random stream alone."""
    import torch

    from pytest_torchcompile.judging.capture import GraphCapture
    from pytest_torchcompile.judging.judge import judge_graph
    from pytest_torchcompile.torch_internals.compiling import reset
    from pytest_torchcompile.torch_internals.config import inductor_config
    from pytest_torchcompile.torch_internals.rng import EAGER_RNG_CONFIG

    def fn(x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.dropout(x, 0.5, True) * 2 + torch.randn_like(x)

    x = torch.randn(64)
    # The graph as Inductor receives it (the decompositions fallback_random selects), as the
    # repro of a captured graph holds it.
    capture = GraphCapture()
    reset()
    with inductor_config(EAGER_RNG_CONFIG):
        torch.compile(fn, backend=capture.backend())(x)
    gm = capture.graphs[0].gm
    torch.manual_seed(5)
    expected = torch.rand(3)
    torch.manual_seed(5)
    with inductor_config(EAGER_RNG_CONFIG):
        verdict = judge_graph(gm, [x], 1e-4, True)
    reset()
    assert verdict.failure is None, verdict.leaves
    assert torch.equal(torch.rand(3), expected)
