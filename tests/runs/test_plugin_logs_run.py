"""A test's logs under --compile-accuracy are its logs plainly: the file locks the plugin takes for
its own work in the test (the repro directory's, the Inductor caches' of its compiles) add no
``filelock`` DEBUG record to the test's ``caplog``, and neither do the check's extra runs of the
model nor Dynamo's warnings of the plugin's compiles; a failing test's captured log holds the
plain call's records."""

from __future__ import annotations

import itertools
import re

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


MODEL_LOGS = """
import logging

import pytest
import torch


class Logs(torch.nn.Module):
    def forward(self, x):
        logging.getLogger("mymodel").warning("forward")
        return torch.relu(x)


def test_model_logs(compile_accuracy, caplog):
    caplog.set_level(logging.DEBUG)
    # momentum=None: its .item() is a graph break Dynamo warns of as the check compiles
    model = torch.nn.Sequential(Logs(), torch.nn.BatchNorm1d(4, momentum=None)).train()
    compile_accuracy(model, torch.randn(8, 4))
    assert [(r.name, r.levelname, r.getMessage()) for r in caplog.records] == [
        ("mymodel", "WARNING", "forward")
    ]


@pytest.mark.inductor_repro(
    inductor_config={"cpp.inject_relu_bug_TESTING_ONLY": "accuracy"}, minify=False
)
def test_model_fails(compile_accuracy):
    compile_accuracy(Logs(), torch.randn(64))
    pytest.fail("the test's own failure, plainly")
"""


@pytest.mark.parametrize("flag", [[], ["--compile-accuracy"]])
def test_a_models_logs_are_the_plain_calls_alone(
    pytester: pytest.Pytester, flag: list[str]
) -> None:
    """The model's records of the check's runs (eager twice, fp64, Dynamo's tracing) are not
    the test's: ``caplog`` and a failing test's "Captured log call" hold those of the plain call,
    once, as a plain run does."""
    pytester.makepyfile(test_model_logs=MODEL_LOGS)
    result = pytester.runpytest(*flag)
    result.assert_outcomes(passed=1, failed=1)
    output = result.stdout.str()
    after = output[output.index("Captured log call") :].splitlines()[1:]
    captured = list(itertools.takewhile(lambda line: line[:1] not in ("=", "-", "_"), after))
    assert len(captured) == 1 and re.fullmatch(
        r"WARNING +mymodel:test_model_logs\.py:\d+ forward", captured[0]
    ), captured
    assert ("fail_accuracy" in output) == bool(flag)
