"""The real-suite script's differential view: a test decided otherwise under
``--compile-accuracy`` than plainly is an outcome difference, unless a compiler failure the
plugin confirmed failed it."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "real_suites.py"


def real_suites() -> ModuleType:
    spec = importlib.util.spec_from_file_location("real_suites", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    # dataclasses look their module up by name as the class is made.
    sys.modules[spec.name] = module
    try:
        spec.loader.exec_module(module)
    finally:
        del sys.modules[spec.name]
    return module


def test_every_difference_but_a_confirmed_compiler_failure() -> None:
    script = real_suites()
    plain = {
        "tests.test_m::test_bug": "passed",
        "tests.test_m::test_expects_error": "passed",
        "tests.test_m.TestRandom::test_sample[0]": "failed",
        "tests.test_m::test_same": "skipped",
    }
    checked = {
        "tests.test_m::test_bug": "failed",
        "tests.test_m::test_expects_error": "failed",
        "tests.test_m.TestRandom::test_sample[0]": "passed",
        "tests.test_m::test_same": "skipped",
    }
    report = {
        "tests": [
            {
                "nodeid": "tests/test_m.py::test_bug",
                "checks": [{"status": "pass"}, {"status": "fail_accuracy"}],
            },
            {
                "nodeid": "tests/test_m.py::test_expects_error",
                "checks": [{"status": "handled_error"}],
            },
            {
                "nodeid": "tests/test_m.py::TestRandom::test_sample[0]",
                "checks": [{"status": "pass"}],
            },
        ]
    }

    def outcome(results: dict[str, str]) -> object:
        return script.Outcome(
            1.0,
            0.0,
            0,
            {test: (result, f"{result} message") for test, result in results.items()},
            {},
            report,
        )

    assert script.outcome_differences(outcome(plain), outcome(checked)) == [
        ("tests.test_m.TestRandom::test_sample[0]", "failed", "passed", "passed message"),
        ("tests.test_m::test_expects_error", "passed", "failed", "failed message"),
    ]
