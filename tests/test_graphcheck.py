"""Plain torch.compile calls inside tests are checked graph by graph under --compile-accuracy."""

from __future__ import annotations

import subprocess
import sys

import pytest

pytest_plugins = ["pytester"]

SUITE = """
import pytest, torch

RELU_BUG = {"cpp.inject_relu_bug_TESTING_ONLY": "accuracy"}


@pytest.mark.inductor_repro(inductor_config=RELU_BUG)
def test_plain_compile():
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
    assert torch.compile(model)(torch.randn(4, 8)).shape == (4, 2)


class ReluInBackward(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, grad):
        return grad.relu() * 2


@pytest.mark.inductor_repro(inductor_config=RELU_BUG)
def test_backward_only_bug():
    def f(x):
        return ReluInBackward.apply(x).sin()

    x = torch.randn(16, 8, requires_grad=True)
    torch.compile(f)(x).sum().backward()


def test_graph_break_and_other_backend():
    def f(x):
        y = x.cos()
        print("graph break")
        return y.relu()

    torch.compile(f)(torch.randn(8))
    torch.compile(f, backend="aot_eager")(torch.randn(8))
"""


def test_plain_compile_calls_are_checked_per_graph(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_models=SUITE)
    result = pytester.runpytest("--compile-accuracy", "--no-compile-minify")
    result.assert_outcomes(passed=1, failed=2)
    result.stdout.fnmatch_lines([
        "*test_plain_compile*",
        "*fail_accuracy: * of graph 0 (forward) from *test_models.py:*(test_plain_compile)*",
    ])
    result.stdout.fnmatch_lines(["*fail_accuracy: * of graph * (backward) from *"])
    repros = sorted((pytester.path / ".compile-accuracy").glob("*backward_only_bug*/repro.py"))
    assert len(repros) == 1
    assert "(backward)" in repros[0].read_text().splitlines()[1]
    run = subprocess.run([sys.executable, str(repros[0])], capture_output=True, text=True, timeout=300)
    assert run.returncode == 1, run.stdout + run.stderr


def test_flag_off_and_marked_scope(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_models=SUITE)
    pytester.runpytest().assert_outcomes(passed=3)
    pytester.makepyfile(test_unmarked="""
        import torch, torch._inductor.config as config

        def test_unmarked(monkeypatch):
            monkeypatch.setattr(config.cpp, "inject_relu_bug_TESTING_ONLY", "accuracy")
            torch.compile(torch.nn.ReLU())(torch.randn(8))
    """)
    scoped = pytester.runpytest("test_unmarked.py", "--compile-accuracy", "--compile-accuracy-scope=marked")
    scoped.assert_outcomes(passed=1)
    everything = pytester.runpytest("test_unmarked.py", "--compile-accuracy", "--no-compile-minify")
    everything.assert_outcomes(failed=1)
