"""CI gating and reports through the plugin: baseline file, per-test outcomes, JSON/JUnit/GitHub
output, with and without xdist. pytester runs compile real models; the miscompiled one switches on
Inductor's own ``inject_relu_bug_TESTING_ONLY`` knob through ``@pytest.mark.inductor_repro``."""

from __future__ import annotations

import dataclasses
import json
import re
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
import torch
from inline import runpytest

from pytest_torchcompile.common.results import CaseResult
from pytest_torchcompile.common.verdict import Status
from pytest_torchcompile.reporting.baseline import Gate
from pytest_torchcompile.reporting.baseline_file import (
    HEADER,
    Baseline,
    BaselineEntry,
    BaselineError,
    load_baseline,
)

pytest_plugins = ["pytester"]

SUITE = """
from pathlib import Path

import pytest
import torch

BROKEN = set(Path(__file__).with_name("broken.txt").read_text().split())
BUG = {{"cpp.inject_relu_bug_TESTING_ONLY": "accuracy"}}


def mlp():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))

{tests}
"""

TEST = """
@pytest.mark.inductor_repro(inductor_config=BUG if "{name}" in BROKEN else {{}})
def test_{name}(compile_accuracy):
    out = compile_accuracy(mlp(), torch.randn(4, 8))
    assert out.shape == (4, 4)
"""

FAST = (
    "--compile-accuracy",
    "--no-compile-minify",
    "-p",
    "no:cacheprovider",
    "-W",
    "ignore::DeprecationWarning",
)


def write_suite(pytester: pytest.Pytester, names: str, broken: str) -> None:
    pytester.makepyfile(
        test_models=SUITE.format(tests="\n".join(TEST.format(name=name) for name in names))
    )
    (pytester.path / "broken.txt").write_text(" ".join(broken))


def assert_said(result: pytest.RunResult, line: str) -> None:
    """``line`` is in the output as a line of its own, perhaps wrapped to the terminal's width
    (at spaces: the test id stays whole on the first line)."""
    first = line.split(": ", 1)[0]
    start = next(
        (i for i, printed in enumerate(result.outlines) if printed.startswith(f"{first}: ")), None
    )
    assert start is not None, f"no line starts with {first!r}"
    said = " ".join(result.outlines[start].split())
    for printed in result.outlines[start + 1 :]:
        if not printed.startswith(" " * (len(first) - len(first.lstrip()) + 2)):
            break
        said += " " + " ".join(printed.split())
    assert said == " ".join(line.split())


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return runpytest(pytester, *FAST, "--compile-accuracy-baseline", "baseline.txt", *args)


def repro_of(pytester: pytest.Pytester, name: str) -> Path:
    return pytester.path / ".compile-accuracy" / f"test_models.py__test_{name}" / "repro.py"


# --- the round trip of a model repo adopting the plugin -----------------------------------------


@pytest.mark.slow  # five runs; test_baseline_verdicts.py is its one-run twin
def test_baseline_round_trip_green_red_improved_strict(pytester: pytest.Pytester) -> None:
    write_suite(pytester, "ab", broken="a")
    baseline = pytester.path / "baseline.txt"

    record = run(pytester, "--compile-accuracy-update-baseline")
    # Recording does not fail the run; the failure still shows.
    assert record.ret == 0
    record.assert_outcomes(failed=1, passed=1)
    # Paths under the rootdir are shown relative to it, as test ids are.
    assert_said(
        record,
        "baseline written to baseline.txt: 2 rows (2 added, 0 changed, 0 removed, 0 kept of tests "
        "not run)",
    )
    assert_said(
        record,
        "recording run: 1 test failure(s) from compile accuracy, recorded in the baseline: they do "
        "not fail this run (exit status 0)",
    )
    record.stdout.fnmatch_lines(["FAILED test_models.py::test_a - *"])
    record.stdout.no_fnmatch_line("*the run fails against the baseline*")
    assert baseline.read_text() == (
        f"{HEADER}\ntest_models.py::test_a\tfail_accuracy\ntest_models.py::test_b\tpass\n"
    )
    # A note added by hand, e.g. the upstream bug, shows up in the outcome.
    baseline.write_text(
        baseline.read_text().replace("fail_accuracy", "fail_accuracy\thttps://bugs/1")
    )

    green = run(pytester, "-rx")
    assert green.ret == 0
    green.assert_outcomes(passed=1, xfailed=1)
    green.stdout.fnmatch_lines(
        [
            "fail_accuracy *expected failure *test_models.py::test_a",
            "pass *ok *test_models.py::test_b",
            "baseline: 1 ok, 1 expected failure",
            "XFAIL test_models.py::test_a - compile accuracy expected failure: still fail_accuracy, as the "
            "baseline records [[]https://bugs/1[]] (baseline baseline.txt:2); "
            "repro: .compile-accuracy/test_models.py__test_a/repro.py",
        ]
    )
    # The rerun replaced the recording run's case directory rather than writing another beside it.
    assert [
        p.name for p in (pytester.path / ".compile-accuracy").glob("test_models.py__test_a*/")
    ] == ["test_models.py__test_a"]

    (pytester.path / "broken.txt").write_text("a b")
    red = run(pytester)
    assert red.ret == pytest.ExitCode.TESTS_FAILED
    red.assert_outcomes(failed=1, xfailed=1)
    red.stdout.fnmatch_lines(
        [
            "*- compile accuracy baseline -*",
            "NEW FAILURE: fail_accuracy, the baseline expects pass (baseline baseline.txt:3)",
            "*= compile accuracy =*",
            "baseline: 1 expected failure, 1 NEW FAILURE",
            "  NEW FAILURE test_models.py::test_b: fail_accuracy, the baseline expects pass",
            "compile accuracy: the run fails against the baseline:",
            "FAILED test_models.py::test_b - *",
        ]
    )

    (pytester.path / "broken.txt").write_text("")
    improved = run(pytester)
    assert improved.ret == 0
    improved.assert_outcomes(passed=2)
    improved.stdout.fnmatch_lines(["baseline: 1 ok, 1 IMPROVED"])
    assert_said(
        improved,
        "  IMPROVED test_models.py::test_a: pass, the baseline expects fail_accuracy [https://bugs/1]",
    )
    improved.stdout.no_fnmatch_line("*the run fails*")

    strict = run(pytester, "--compile-accuracy-strict")
    assert strict.ret == pytest.ExitCode.TESTS_FAILED
    strict.assert_outcomes(passed=2)
    # Each reason wrapped to the terminal, under its indent.
    strict.stdout.fnmatch_lines(
        [
            "compile accuracy: the run fails against the baseline:",
            "  IMPROVED test_models.py::test_a: pass, the baseline expects fail_accuracy",
            "    (strict: record it in the baseline) [[]https://bugs/1[]]",
        ]
    )
    assert baseline.read_text().count("\n") == 3, (
        "only --compile-accuracy-update-baseline writes the file"
    )


# --- reports: JSON, JUnit and GitHub, the same with and without xdist ---------------------------


BASELINE_FOR_REPORTS = (
    "test_models.py::test_a\tfail_accuracy\thttps://github.com/pytorch/pytorch/issues/1\n"
    "test_models.py::test_b\tpass\n"
    "test_models.py::test_c\tflaky\tthread count\n"
    "test_models.py::test_gone\tpass\n"
)
CASE_RESULT_FIELDS = {f.name for f in dataclasses.fields(CaseResult)}
LEAF_FIELDS = {
    "path",
    "shape",
    "dtype",
    "passed",
    "rule",
    "rmse_compiled",
    "rmse_eager",
    "multiplier",
    "max_abs_error",
    "max_error_index",
    "detail",
}


def junit_cases(path: Path) -> dict[str, dict[str, Any]]:
    cases = {}
    for case in ET.parse(path).getroot().iter("testcase"):
        skipped = case.find("skipped")
        cases[case.get("name", "")] = {
            "properties": {p.get("name"): p.get("value") for p in case.iter("property")},
            "skipped": None if skipped is None else (skipped.get("type"), skipped.get("message")),
            "failed": case.find("failure") is not None,
        }
    return cases


def without_timings(report: dict[str, Any]) -> dict[str, Any]:
    for test in report["tests"]:
        for check in test["checks"]:
            check["compile_seconds"] = None
    return report


def check_json_report(report: dict[str, Any], pytester: pytest.Pytester) -> None:
    assert report["schema_version"] == 1
    environment = report["environment"]
    assert environment["torch"] == torch.__version__
    assert {"triton", "python"} <= set(environment)
    # Taken after the tests: the config overrides they patched for themselves are gone again.
    assert environment["inductor_config"] == {}
    assert report["counts"]["checks"] == {
        "pass": 2,
        "fail_accuracy": 2,
        "fail_compile": 0,
        "fail_runtime": 0,
        "eager_fail": 0,
        "eager_nondeterministic": 0,
        "out_of_memory": 0,
        "no_fp64_reference": 0,
        "unconfirmed": 0,
        "handled_error": 0,
        "inconclusive": 0,
        "not_judged": 0,
    }
    assert report["counts"]["tests"] == report["counts"]["checks"]
    assert report["counts"]["baseline"] == {
        "ok": 1,
        "expected_failure": 1,
        "new_failure": 0,
        "improved": 0,
        "missing": 1,
        "flaky": 1,
    }
    tests = {test["nodeid"]: test for test in report["tests"]}
    assert list(tests) == [f"test_models.py::test_{name}" for name in "abcd"]
    assert {
        name: (
            t["status"],
            t["baseline"]["kind"],
            t["baseline"]["expected"],
            t["baseline"]["fails_run"],
        )
        for name, t in tests.items()
    } == {
        "test_models.py::test_a": ("fail_accuracy", "expected_failure", "fail_accuracy", False),
        "test_models.py::test_b": ("pass", "ok", "pass", False),
        "test_models.py::test_c": ("fail_accuracy", "flaky", "flaky", False),
        "test_models.py::test_d": ("pass", "missing", None, False),
    }
    assert tests["test_models.py::test_a"]["baseline"]["message"] == (
        "still fail_accuracy, as the baseline records [https://github.com/pytorch/pytorch/issues/1]"
    )
    assert tests["test_models.py::test_c"]["baseline"]["message"] == (
        "fail_accuracy (flaky in the baseline) [thread count]"
    )

    (failing,) = tests["test_models.py::test_a"]["checks"]
    assert set(failing) == CASE_RESULT_FIELDS
    assert failing["nodeid"] == "test_models.py::test_a"
    assert failing["status"] == "fail_accuracy"
    assert "deviate" in failing["message"]
    assert failing["case_id"] == "test_models.py__test_a"
    assert failing["repro_path"] == str(repro_of(pytester, "a"))
    assert failing["reference"] == "fp64"
    assert failing["worst_ratio"] > 1000
    assert failing["graph"].startswith("graph 0 (forward)")
    assert failing["minify"] is None
    assert failing["compile_seconds"] > 0
    (leaf,) = failing["leaves"]
    assert set(leaf) == LEAF_FIELDS
    assert (leaf["path"], leaf["shape"], leaf["dtype"], leaf["passed"], leaf["rule"]) == (
        "out",
        [4, 4],
        "float32",
        False,
        "fp64 rmse",
    )
    assert leaf["rmse_compiled"] > 1000 * leaf["rmse_eager"]
    assert len(leaf["max_error_index"]) == 2

    (passing,) = tests["test_models.py::test_b"]["checks"]
    assert (passing["status"], passing["case_id"], passing["repro_path"], passing["minify"]) == (
        "pass",
        None,
        None,
        None,
    )
    assert [leaf["passed"] for leaf in passing["leaves"]] == [True]


def check_junit(cases: dict[str, dict[str, Any]], pytester: pytest.Pytester) -> None:
    a = cases["test_a"]
    assert a["properties"] == {
        "torchcompile_case": "test_models.py__test_a",
        "torchcompile_status": "fail_accuracy",
        "torchcompile_worst_ratio": a["properties"]["torchcompile_worst_ratio"],
        "torchcompile_repro": str(repro_of(pytester, "a")),
        "torchcompile_reference": "fp64",
    }
    assert float(a["properties"]["torchcompile_worst_ratio"]) > 1000
    kind, message = a["skipped"]
    assert kind == "pytest.xfail"
    assert message.startswith("compile accuracy expected failure: still fail_accuracy")
    assert message.endswith(f"repro: {repro_of(pytester, 'a').relative_to(pytester.path)}")
    assert cases["test_c"]["skipped"][1].startswith(
        "compile accuracy flaky: fail_accuracy (flaky in the baseline)"
    )
    for name in ("test_b", "test_d"):
        assert cases[name]["properties"] == {
            "torchcompile_status": "pass",
            "torchcompile_reference": "fp64",
        }
        assert cases[name]["skipped"] is None
    assert not any(case["failed"] for case in cases.values())


CONTROLLER_IMPORTS = """
import sys


def pytest_unconfigure(config):
    if not hasattr(config, "workerinput"):
        with open("controller-imports.txt", "w") as file:
            file.write(str("torch._inductor.compile_fx" in sys.modules))
"""


@pytest.mark.slow
def test_reports_field_by_field_and_identical_under_xdist(
    pytester: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    write_suite(pytester, "abcd", broken="ac")
    (pytester.path / "baseline.txt").write_text(BASELINE_FOR_REPORTS)
    pytester.makeconftest(CONTROLLER_IMPORTS)
    outputs = {}
    for workers in ("0", "2"):
        shutil.rmtree(pytester.path / ".compile-accuracy", ignore_errors=True)
        github = pytester.path / f"summary-{workers}.md"
        github.write_text("## earlier step\n")
        monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(github))
        # Processes of their own: the report records the Inductor config of the process it runs in,
        # which earlier tests of a shared one leave marked as set (see inductor_config_restored).
        result = pytester.runpytest_subprocess(
            *FAST,
            "--compile-accuracy-baseline",
            "baseline.txt",
            "-n",
            workers,
            "--compile-accuracy-report",
            f"report-{workers}.json",
            f"--junitxml=junit-{workers}.xml",
        )
        assert result.ret == 0
        result.assert_outcomes(passed=2, xfailed=2)
        # Printed once, by the controller: one table row per check, the stale row named by line.
        assert sum(line.endswith("  test_models.py::test_a") for line in result.outlines) == 1
        result.stdout.fnmatch_lines(
            [
                "baseline: 1 ok, 1 expected failure, 1 missing, 1 flaky",
                "  missing test_models.py::test_d: pass; the test is not in the baseline",
                "WARNING baseline.txt:4: unknown test id test_models.py::test_gone: *",
                f"JSON report written to report-{workers}.json",
            ]
        )
        assert_said(
            result,
            "  flaky test_models.py::test_c: fail_accuracy (flaky in the baseline) [thread count]",
        )
        report = json.loads((pytester.path / f"report-{workers}.json").read_text())
        check_json_report(report, pytester)
        if workers == "2":
            # The workers described the environment: the controller imported no compiler for it.
            assert (pytester.path / "controller-imports.txt").read_text() == "False"
        cases = junit_cases(pytester.path / f"junit-{workers}.xml")
        check_junit(cases, pytester)
        markdown = github.read_text()
        assert markdown.startswith("## earlier step\n### pytest-torchcompile\n")
        assert "**Baseline:** 1 ok, 1 expected failure, 1 missing, 1 flaky" in markdown
        assert "| `test_models.py::test_a` | test_models.py__test_a | fail_accuracy |" in markdown
        outputs[workers] = (without_timings(report), cases, markdown)
    assert outputs["2"] == outputs["0"]


# --- generated repro tests of known upstream bugs -----------------------------------------------


@pytest.mark.slow
def test_repro_of_a_known_bug_xfails_until_torch_fixes_it(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\n")
    write_suite(pytester, "a", broken="a")
    pytester.runpytest(*FAST).assert_outcomes(failed=1)
    repro = repro_of(pytester, "a")
    repro_id = ".compile-accuracy/test_models.py__test_a/repro.py::test_repro"
    (pytester.path / "baseline.txt").write_text(f"{repro_id}\tfail_accuracy\tupstream #1\n")
    args = ("-p", "no:cacheprovider", "-rx", "--compile-accuracy-baseline", "baseline.txt")

    # Processes of their own: a repro sets the Inductor config of the process that imports it.
    known = pytester.runpytest_subprocess(str(repro.relative_to(pytester.path)), *args)
    assert known.ret == 0
    known.assert_outcomes(xfailed=1)
    known.stdout.fnmatch_lines(
        [
            f"XFAIL {repro_id} - compile accuracy expected failure: still fail_accuracy, as the baseline records "
            f"[[]upstream #1[]] (baseline baseline.txt:1); repro: {repro.relative_to(pytester.path)}",
        ]
    )

    # The day torch fixes the bug (here: the repro no longer switches the knob on) the run says so.
    source = repro.read_text()
    fixed_source = re.sub(r"(inject_relu_bug_TESTING_ONLY) = .*", r"\1 = None", source)
    assert fixed_source != source
    repro.write_text(fixed_source)
    fixed = pytester.runpytest_subprocess(str(repro.relative_to(pytester.path)), *args)
    assert fixed.ret == 0
    fixed.assert_outcomes(passed=1)
    assert_said(
        fixed, f"  IMPROVED {repro_id}: pass, the baseline expects fail_accuracy [upstream #1]"
    )


# --- baseline files that cannot be trusted ------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "line", "fragment"),
    [
        (
            "test_models.py::test_a\tpass\ntest_models.py::test_b fail_accuracy\n",
            2,
            "malformed row",
        ),
        (
            f"{HEADER}\n\ntest_models.py::test_a\tfailed\n",
            3,
            "unknown status 'failed' for test_models.py::test_a",
        ),
    ],
    ids=["malformed", "unknown-status"],
)
def test_unusable_baseline_is_a_usage_error_naming_the_line(
    pytester: pytest.Pytester,
    text: str,
    line: int,
    fragment: str,
) -> None:
    write_suite(pytester, "a", broken="")
    (pytester.path / "baseline.txt").write_text(text)
    result = run(pytester)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [f"ERROR: compile accuracy baseline: {pytester.path / 'baseline.txt'}:{line}: {fragment}*"]
    )
    result.stdout.no_fnmatch_line("collected *")


def test_rows_of_unknown_tests_warn_and_fail_under_strict(pytester: pytest.Pytester) -> None:
    write_suite(pytester, "ab", broken="")
    baseline = pytester.path / "baseline.txt"
    baseline.write_text(
        "test_models.py::test_a\tpass\ntest_models.py::test_renamed\tfail_accuracy\nother.py::test_x\tpass\n"
    )
    # The baseline from the ini file, relative to the rootdir; without --compile-accuracy no check runs.
    pytester.makeini("[pytest]\ncompile_accuracy_baseline = baseline.txt\n")
    args = ("-p", "no:cacheprovider", "-k", "test_a")
    lenient = pytester.runpytest(*args)
    assert lenient.ret == 0
    assert_said(
        lenient,
        "WARNING baseline.txt:2: unknown test id test_models.py::test_renamed: its file was "
        "collected but the test was not (renamed or removed?); delete the row or rerun with "
        "--compile-accuracy-update-baseline",
    )
    assert_said(
        lenient,
        "baseline baseline.txt: no test ran a compile-accuracy check (--compile-accuracy is off)",
    )
    lenient.stdout.no_fnmatch_line("*other.py::test_x*")

    strict = pytester.runpytest(*args, "--compile-accuracy-strict")
    assert strict.ret == pytest.ExitCode.TESTS_FAILED
    strict.stdout.fnmatch_lines(
        [
            "ERROR baseline.txt:2: unknown test id test_models.py::test_renamed: *",
            "compile accuracy: the run fails against the baseline:",
            "  unknown test id test_models.py::test_renamed (baseline.txt:2; strict)",
        ]
    )

    # Selecting tests by node id narrows collection itself: the other rows of the file are not judged.
    narrowed = pytester.runpytest(
        "-p", "no:cacheprovider", "test_models.py::test_a", "--compile-accuracy-strict"
    )
    assert narrowed.ret == 0
    narrowed.stdout.no_fnmatch_line("*unknown test id*")


def test_new_options_are_documented(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest("--help")
    result.stdout.fnmatch_lines_random(
        [
            "*--compile-accuracy-baseline=PATH*",
            "*--compile-accuracy-update-baseline*",
            "*--compile-accuracy-strict*",
            "*--compile-accuracy-report=PATH*",
            "*compile_accuracy_baseline (string)*",
            "*compile_accuracy_report (string)*",
        ]
    )


@pytest.mark.parametrize(
    "plugins",
    [
        ["-p", "no:xdist"],
        pytest.param(
            ["-n", "2"], marks=pytest.mark.slow
        ),  # xdist's reports: test_reports_field_by_field_...
    ],
    ids=["no-xdist", "xdist"],
)
def test_recording_passes_unless_a_test_fails_for_another_reason(
    pytester: pytest.Pytester,
    plugins: list[str],
) -> None:
    write_suite(pytester, "ab", broken="a")
    pytester.makepyfile(test_other="def test_plain_failure():\n    assert 1 == 2\n")
    record = ("--compile-accuracy-update-baseline", *plugins)

    other = run(pytester, *record)
    assert other.ret == pytest.ExitCode.TESTS_FAILED
    other.assert_outcomes(failed=2, passed=1)
    assert_said(
        other,
        "recording run: 1 test failure(s) from compile accuracy, recorded in the baseline: they do "
        "not fail this run; 1 other test failure(s) do",
    )

    (
        pytester.path / "baseline.txt"
    ).unlink()  # else test_a xfails: the run is judged by the file it had
    only_recorded = run(pytester, *record, "-k", "not plain_failure")
    assert only_recorded.ret == 0
    only_recorded.assert_outcomes(failed=1, passed=1)
    assert_said(
        only_recorded,
        "recording run: 1 test failure(s) from compile accuracy, recorded in the baseline: "
        "they do not fail this run (exit status 0)",
    )
    assert (pytester.path / "baseline.txt").read_text().splitlines()[1:] == [
        "test_models.py::test_a\tfail_accuracy",
        "test_models.py::test_b\tpass",
    ]


def test_update_needs_a_baseline_path(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest("--compile-accuracy-update-baseline")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["ERROR: --compile-accuracy-update-baseline needs --compile-accuracy-baseline PATH"]
    )


# --- Gate, the baseline as one run uses it (no pytest run) ----------------------------------------


def case(test_id: str, status: Status, repro: str | None = None) -> CaseResult:
    return CaseResult(test_id, status, repro_path=repro)


def gate_for(tmp_path: Path, text: str, strict: bool = False, update: bool = False) -> Gate:
    path = tmp_path / "baseline.txt"
    path.write_text(text)
    return Gate.load(path, strict=strict, update=update)


def test_gate_xfail_reason_and_failure_note(tmp_path: Path) -> None:
    gate = gate_for(tmp_path, "t.py::a\tfail_compile\tbug 7\nt.py::b\tpass\nt.py::c\tflaky\n")
    path = tmp_path / "baseline.txt"
    failing = [case("t.py::a", Status.PASS), case("t.py::a", Status.FAIL_COMPILE, "r/repro.py")]
    assert gate.xfail_reason("t.py::a", failing) == (
        f"compile accuracy expected failure: still fail_compile, as the baseline records [bug 7] (baseline {path}:1); "
        "repro: r/repro.py"
    )
    assert gate.failure_note("t.py::a", failing) is None
    # Another failure than the recorded one is new, not excused.
    other = [case("t.py::a", Status.FAIL_ACCURACY)]
    assert gate.xfail_reason("t.py::a", other) is None
    assert gate.failure_note("t.py::a", other) == (
        f"NEW FAILURE: fail_accuracy, a different failure than the baseline's fail_compile [bug 7] (baseline {path}:1)"
    )
    assert gate.xfail_reason("t.py::c", [case("t.py::c", Status.FAIL_RUNTIME)]) == (
        f"compile accuracy flaky: fail_runtime (flaky in the baseline) (baseline {path}:3)"
    )
    assert gate.xfail_reason("t.py::c", [case("t.py::c", Status.PASS)]) is None
    assert gate.failure_note("t.py::new", [case("t.py::new", Status.OUT_OF_MEMORY)]) == (
        f"NEW FAILURE: out_of_memory, and the test is not in the baseline (baseline {path})"
    )
    assert gate.decide("t.py::b", []) is None


def test_gate_run_failures_unknown_rows_and_narrowing(tmp_path: Path) -> None:
    text = "t.py::fixed\tfail_accuracy\nt.py::gone\tpass\nt.py::ok\tpass\nu.py::gone\tpass\n"
    results = [case("t.py::fixed", Status.PASS), case("t.py::ok", Status.PASS)]
    collected = ["t.py::fixed", "t.py::ok", "u.py::other"]
    lenient = gate_for(tmp_path, text)
    unknown = lenient.unknown(collected)
    assert [entry.test_id for entry in unknown] == ["t.py::gone", "u.py::gone"]
    assert [entry.test_id for entry in lenient.unknown(collected, {"u.py"})] == ["t.py::gone"]
    assert lenient.run_failures(lenient.decisions(results), unknown) == []
    assert lenient.unknown_lines(unknown)[0].startswith(
        f"WARNING {tmp_path / 'baseline.txt'}:2: unknown test id"
    )
    strict = gate_for(tmp_path, text, strict=True)
    assert strict.run_failures(strict.decisions(results), unknown) == [
        "IMPROVED t.py::fixed: pass, the baseline expects fail_accuracy (strict: record it in the baseline)",
        f"unknown test id t.py::gone ({tmp_path / 'baseline.txt'}:2; strict)",
        f"unknown test id u.py::gone ({tmp_path / 'baseline.txt'}:4; strict)",
    ]
    assert strict.unknown_lines(unknown)[0].startswith("ERROR ")


def test_gate_update_keeps_rows_not_run_drops_stale_rows(tmp_path: Path) -> None:
    gate = gate_for(
        tmp_path,
        "t.py::a\tfail_accuracy\tbug 1\nt.py::gone\tpass\nt.py::c\tflaky\tx\nv.py::z\tpass\n",
    )
    results = [
        case("t.py::a", Status.PASS),
        case("t.py::c", Status.FAIL_RUNTIME),
        case("t.py::new", Status.FAIL_COMPILE),
    ]
    line = gate.update_file(results, [gate.baseline.entries["t.py::gone"]])
    assert line == (
        f"baseline written to {gate.path}: 4 rows (1 added, 1 changed, 1 removed, 1 kept of tests not run)"
    )
    assert gate.path.read_text() == (
        f"{HEADER}\nt.py::a\tpass\tbug 1\nt.py::c\tflaky\tx\nt.py::new\tfail_compile\nv.py::z\tpass\n"
    )


def test_gate_update_starts_a_missing_file_but_reading_needs_it(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "baseline.txt"
    with pytest.raises(BaselineError, match="baseline file not found"):
        Gate.load(path)
    gate = Gate.load(path, update=True)
    assert gate.baseline == Baseline(path, {})
    gate.update_file([case("t.py::a", Status.FAIL_ACCURACY)])
    assert load_baseline(path).entries == {
        "t.py::a": BaselineEntry("t.py::a", Status.FAIL_ACCURACY, "", 2)
    }


def test_a_repro_tests_failure_kinds_are_the_ones_repros_are_written_with() -> None:
    """The session reads a repro test's kind without importing the (torch) module that writes it."""
    from pytest_torchcompile.common.kinds import FailureKind
    from pytest_torchcompile.run import repro_tests

    written = {
        FailureKind.ACCURACY,
        FailureKind.COMPILE_ERROR,
        FailureKind.RUNTIME_ERROR,
        FailureKind.EAGER_ERROR,
    }
    assert set(repro_tests.REPRO_STATUSES) == written
