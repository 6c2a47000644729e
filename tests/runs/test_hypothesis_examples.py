"""A hypothesis test under --compile-accuracy: of the examples that fail, the one hypothesis
reports is the one written. The lighter twin of test_end_to_end's shrinking run (``slow``): no
shrinking, so two examples fail (the first found, and hypothesis' replay of it to report it)."""

from __future__ import annotations

import pytest

pytest_plugins = ["pytester"]


def test_a_failing_hypothesis_test_writes_one_repro(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_model="""
        import pytest, torch
        from hypothesis import Phase, given, settings
        from pytest_torchcompile.strategies import tensors

        model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU()).eval()

        @pytest.mark.inductor_repro(inductor_config={"cpp.inject_relu_bug_TESTING_ONLY": "accuracy"})
        @settings(max_examples=3, deadline=None, database=None, phases=[Phase.generate])
        @given(x=tensors(shape=(4, 8), layout="contiguous"))
        def test_fixed_batch(compile_accuracy, x):
            compile_accuracy(model, x)
    """
    )
    result = pytester.runpytest("--compile-accuracy", "--no-compile-minify")
    result.assert_outcomes(failed=1)
    repros = sorted((pytester.path / ".compile-accuracy").glob("*/repro.py"))
    assert [repro.parent.name for repro in repros] == ["test_model.py__test_fixed_batch"], (
        "superseded examples leave no repro"
    )
    result.stdout.fnmatch_lines(["compile accuracy: 1 check in 1 test: 1 fail_accuracy"])
