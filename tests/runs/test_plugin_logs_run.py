"""A test's logs under --compile-accuracy are its logs plainly: the file locks the plugin takes for
its own work in the test (the repro directory's, the Inductor caches' of its compiles) add no
``filelock`` DEBUG record to the test's ``caplog``."""

from __future__ import annotations

import pytest

pytest_plugins = ["pytester"]

SUITE = """
import logging

import pytest
import torch


@pytest.mark.inductor_repro(
    inductor_config={"cpp.inject_relu_bug_TESTING_ONLY": "accuracy"}, minify=False
)
def test_logs(compile_accuracy, caplog):
    caplog.set_level(logging.DEBUG)
    logging.getLogger("the_test").debug("its own record")
    try:
        compile_accuracy(torch.nn.ReLU(), torch.randn(64))  # fails, and a repro is written
    except pytest.fail.Exception:
        pass
    assert [(r.name, r.getMessage()) for r in caplog.records] == [("the_test", "its own record")]
"""


@pytest.mark.parametrize("flag", [[], ["--compile-accuracy"]])
def test_a_tests_debug_logs_hold_no_record_of_the_plugins_locks(
    pytester: pytest.Pytester, flag: list[str]
) -> None:
    pytester.makepyfile(test_logs=SUITE)
    result = pytester.runpytest(*flag)
    result.assert_outcomes(passed=1)
    if flag:
        assert "repro.py" in result.stdout.str(), "the check failed and wrote its repro"
