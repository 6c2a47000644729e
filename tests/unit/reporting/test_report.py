from __future__ import annotations

import importlib.metadata
import json
import math
from pathlib import Path

import pytest
import torch

from pytest_torchcompile.common.leaves import LeafResult
from pytest_torchcompile.common.results import CaseResult, MinifyResult, StopReason
from pytest_torchcompile.common.verdict import Status
from pytest_torchcompile.reporting.baseline import BaselineOutcome, Decision
from pytest_torchcompile.reporting.github import append_github_summary, github_summary_markdown
from pytest_torchcompile.reporting.json_report import SCHEMA_VERSION, json_report, write_json_report
from pytest_torchcompile.reporting.junit import junit_properties
from pytest_torchcompile.reporting.layout import TerminalLayout
from pytest_torchcompile.reporting.terminal import RATIO_LEGEND, terminal_lines
from pytest_torchcompile.torch_internals.environment import report_environment

LEAF = LeafResult(
    path="out[0]",
    shape=(2, 3),
    dtype="bfloat16",
    passed=False,
    rule="fp64 rmse",
    rmse_compiled=0.5,
    rmse_eager=0.01,
    multiplier=3.0,
    max_abs_error=1.25,
    max_error_index=(1, 2),
)
MINIFY = MinifyResult(
    ops_before=12,
    ops_after=3,
    seconds=4.25,
    compiles=17,
    stop=StopReason.MINIMAL,
    path="repros/min_a.py",
    kernel_path="repros/min_a_kernel.py",
    note="",
)


def failing_case() -> CaseResult:
    return CaseResult(
        nodeid="tests/m.py::test_b[bf16]",
        status=Status.FAIL_ACCURACY,
        message="out[0] differs",
        case_id="graph 0",
        worst_ratio=50.0,
        leaves=[LEAF],
        repro_path="repros/a.py",
        minify=MINIFY,
        compile_seconds=2.5,
        graph="graph 0 (forward)",
    )


def results() -> list[CaseResult]:
    # Deliberately out of order: xdist delivers results as workers finish.
    return [
        failing_case(),
        CaseResult(
            nodeid="tests/m.py::test_a", status=Status.PASS, worst_ratio=1.0, compile_seconds=0.25
        ),
        CaseResult(
            nodeid="tests/m.py::test_b[bf16]",
            status=Status.PASS,
            case_id="graph 1",
            worst_ratio=math.inf,
        ),
        CaseResult(
            nodeid="tests/m.py::test_c", status=Status.NO_FP64_REFERENCE, reference="fp32 (cosine)"
        ),
    ]


def decisions() -> dict[str, Decision]:
    return {
        "tests/m.py::test_a": Decision(BaselineOutcome.OK, "pass", Status.PASS, Status.PASS, False),
        "tests/m.py::test_b[bf16]": Decision(
            BaselineOutcome.NEW_FAILURE,
            "fail_accuracy, the baseline expects pass",
            Status.FAIL_ACCURACY,
            Status.PASS,
            True,
        ),
        "tests/m.py::test_c": Decision(
            BaselineOutcome.MISSING,
            "no_fp64_reference; the test is not in the baseline",
            Status.NO_FP64_REFERENCE,
            None,
            False,
        ),
    }


# --- terminal -------------------------------------------------------------------------------


ROOT = Path("/work/repo")


def test_terminal_one_row_per_test_with_the_whole_id_last() -> None:
    lines = terminal_lines(results(), None, TerminalLayout(width=100))
    assert lines[0].split() == ["status", "ratio", "test"]
    assert lines[1].split() == ["pass", "1.00", "tests/m.py::test_a"]
    assert lines[2].split() == ["fail_accuracy", "inf", "tests/m.py::test_b[bf16]"]
    assert lines[3:9] == [
        "    fail_accuracy: out[0] differs",
        "      graph: graph 0 (forward)",
        "      repro: repros/a.py",
        "      minified: repros/min_a.py",
        "      minify: 12 -> 3 ops, 4.2 s, 17 compiles",
        "no_fp64_reference  -      tests/m.py::test_c",
    ]
    assert lines[9:] == [
        *TerminalLayout(width=100).wrap(RATIO_LEGEND, ""),
        "compile accuracy: 4 checks in 3 tests: 2 pass, 1 fail_accuracy, 1 no_fp64_reference",
    ]


def test_terminal_columns_are_aligned() -> None:
    table = [line for line in terminal_lines(results(), decisions()) if not line.startswith(" ")][
        :4
    ]
    for heading in ("ratio", "baseline", "test"):
        column = table[0].index(heading)
        for row in table[1:]:
            assert row[column - 2 : column] == "  " and row[column] != " ", (heading, row)


def test_terminal_marks_a_minification_that_ran_out_of_time_and_a_large_ratio() -> None:
    result = failing_case()
    result.minify = MinifyResult(9, 5, 60.0, 40, StopReason.TIME_BUDGET, path="m.py")
    result.worst_ratio = 21497900.57
    lines = terminal_lines([result], None)
    assert lines[1].split()[:2] == ["fail_accuracy", "2.15e+07"]
    assert "      minify: 9 -> 5 ops, 60.0 s, 40 compiles, time budget hit: not minimal" in lines


@pytest.mark.parametrize(
    ("stop", "label"),
    [
        (StopReason.NOT_REPRODUCED, "the repro does not reproduce"),
        (StopReason.REPRO_BROKEN, "the repro is broken"),
        (StopReason.CRASHED, "the minifier crashed"),
    ],
)
def test_a_case_left_unminified_says_why_not_how_many_ops(stop: StopReason, label: str) -> None:
    result = failing_case()
    result.minify = MinifyResult(373, 373, 3.5, 2, stop, note="the details")
    lines = terminal_lines([result], None)
    assert f"      minify: not minified: {label}" in lines
    assert "      note: the details" in lines
    assert not any("373" in line for line in lines)
    assert result.minify.summary_line("t.py::a") == f"not minified t.py::a: {label}: the details"
    assert f"not minified: {label}" in github_summary_markdown([result], None)
    assert ("torchcompile_minify_stop", str(stop)) in junit_properties(
        result, TerminalLayout().public
    )


def test_terminal_baseline_column_counts_and_notable_tests() -> None:
    lines = terminal_lines(results(), decisions(), TerminalLayout(width=100))
    assert lines[0].split() == ["status", "ratio", "baseline", "test"]
    assert lines[1].split() == ["pass", "1.00", "ok", "tests/m.py::test_a"]
    assert lines[2].split() == [
        "fail_accuracy",
        "inf",
        "NEW",
        "FAILURE",
        "tests/m.py::test_b[bf16]",
    ]
    assert lines[8].split() == ["no_fp64_reference", "-", "missing", "tests/m.py::test_c"]
    assert lines[-3:] == [
        "baseline: 1 ok, 1 NEW FAILURE, 1 missing",
        "  NEW FAILURE tests/m.py::test_b[bf16]: fail_accuracy, the baseline expects pass",
        "  missing tests/m.py::test_c: no_fp64_reference; the test is not in the baseline",
    ]
    # While the baseline is being written, every test not in it yet would be listed as missing.
    assert "missing tests/m.py::test_c" not in "\n".join(
        terminal_lines(results(), decisions(), recording=True)
    )


def test_terminal_lists_improved_and_flaky_tests() -> None:
    flaky = CaseResult(nodeid="t.py::f", status=Status.FAIL_RUNTIME)
    fixed = CaseResult(nodeid="t.py::g", status=Status.PASS)
    lines = terminal_lines(
        [flaky, fixed],
        {
            "t.py::f": Decision(
                BaselineOutcome.FLAKY,
                "fail_runtime (flaky in the baseline)",
                Status.FAIL_RUNTIME,
                "flaky",
                False,
            ),
            "t.py::g": Decision(
                BaselineOutcome.IMPROVED,
                "pass, the baseline expects fail_compile",
                Status.PASS,
                Status.FAIL_COMPILE,
                False,
            ),
        },
    )
    assert lines[-3:] == [
        "baseline: 1 IMPROVED, 1 flaky",
        "  IMPROVED t.py::g: pass, the baseline expects fail_compile",
        "  flaky t.py::f: fail_runtime (flaky in the baseline)",
    ]


def deep_failure() -> CaseResult:
    case_dir = (
        ROOT / ".compile-accuracy" / "tests_models_deep_test_model.py__test_forward-bfloat16-large"
    )
    return CaseResult(
        nodeid="tests/models/"
        + "deep/" * 12
        + "test_model.py::test_forward[bfloat16-large-dynamic]",
        status=Status.FAIL_ACCURACY,
        worst_ratio=1523.4,
        repro_path=str(case_dir / "repro.py"),
        message=f"1 of 3 outputs of graph 2 (backward) from {ROOT}/tests/models/test_model.py:41 (test_forward) "
        "deviate beyond the fp64 rule",
        graph=f"graph 2 (backward) from {ROOT}/tests/models/test_model.py:41",
        minify=MinifyResult(
            114,
            1,
            4.1,
            3,
            StopReason.MINIMAL,
            path=str(case_dir / "minified.py"),
            ops=["aten.native_layer_norm"],
            stage="decompositions",
            failure_type="accuracy",
            stage_summary="deviation appears with decompositions: aten.native_layer_norm",
        ),
        graphs_judged=1,
    )


@pytest.mark.parametrize("width", [80, 120, 200])
def test_terminal_fits_the_width_keeping_ids_whole_and_paths_relative(width: int) -> None:
    plain = CaseResult(
        nodeid="tests/p.py::test_p",
        status=Status.PASS,
        graphs_judged=2,
        unchecked=[
            f"graph 1 (forward) from {ROOT}/tests/p.py:9 (test_p): draws random numbers "
            "(Inductor's RNG differs from eager)"
        ],
    )
    failure = deep_failure()
    baseline = {
        failure.nodeid: Decision(
            BaselineOutcome.NEW_FAILURE,
            "fail_accuracy; the baseline expects pass, "
            "update it with --compile-accuracy-update-baseline if intended",
            Status.FAIL_ACCURACY,
            Status.PASS,
            True,
        )
    }
    lines = terminal_lines([deep_failure(), plain], baseline, TerminalLayout(width, 0, ROOT))
    assert lines[0].split() == ["status", "ratio", "graphs", "baseline", "test"]
    assert lines[1].split()[:6] == ["fail_accuracy", "1.52e+03", "1", "judged", "NEW", "FAILURE"]
    text = "\n".join(lines)
    assert str(ROOT) not in text
    assert "plain torch.compile graphs: 3 judged, 1 unchecked" in lines
    assert (
        ".compile-accuracy/tests_models_deep_test_model.py__test_forward-bfloat16-large/minified.py"
        in "".join(line.strip() for line in lines)
    )
    assert (
        "unchecked graph 1 (forward) from tests/p.py:9 (test_p): draws random numbers"
        in " ".join(text.split())
    )
    assert (
        "[1 test] deviation appears with decompositions: aten.native_layer_norm | ops: "
        "aten.native_layer_norm | accuracy"
    ) in " ".join(text.split())
    # Every line fits the terminal; a test id or path longer than that is wrapped at a "/" or "::".
    assert all(len(line) <= width for line in lines)
    assert failure.nodeid in "".join(line.strip() for line in lines)
    assert (failure.nodeid in lines[1]) == (width > 120)


def test_terminal_verbosity_quiet_shows_failing_rows_and_verbose_every_check() -> None:
    quiet = terminal_lines(results(), None, TerminalLayout(verbosity=-1))
    assert [line.split()[-1] for line in quiet if not line.startswith(" ")][1:-1] == [
        "tests/m.py::test_b[bf16]"
    ]
    passing = [r for r in results() if r.status is Status.PASS]
    assert terminal_lines(passing, None, TerminalLayout(verbosity=-1)) == [
        "compile accuracy: 2 checks in 2 tests: 2 pass"
    ]
    assert terminal_lines(results(), None, TerminalLayout(width=100, verbosity=-2)) == [
        "compile accuracy: 4 checks in 3 tests: 2 pass, 1 fail_accuracy, 1 no_fp64_reference"
    ]
    # -v adds the ratio and compile time of failing checks; a passing check's details only at -vv.
    verbose = terminal_lines(results(), None, TerminalLayout(verbosity=1))
    assert verbose[1:3] == [
        "pass               1.00   tests/m.py::test_a",
        "fail_accuracy      inf    tests/m.py::test_b[bf16]",
    ]
    assert "    pass" not in verbose
    very_verbose = terminal_lines(results(), None, TerminalLayout(verbosity=2))
    assert very_verbose[1:5] == [
        "pass               1.00   tests/m.py::test_a",
        "    pass",
        "      worst ratio: 1.00",
        "      compile: 0.2 s",
    ]
    assert "      reference: fp32 (cosine)" in very_verbose


def test_terminal_nothing_to_report() -> None:
    assert terminal_lines([], None) == []


# --- JSON -----------------------------------------------------------------------------------


ENVIRONMENT = {
    "torch": "2.13.0",
    "python": "3.11.7",
    "cpu": "x86_64",
    "triton": "not installed",
    "inductor_config": {"fallback_random": True},
}


def test_json_report_top_level_and_counts() -> None:
    report = json_report(results(), decisions(), ENVIRONMENT)
    assert list(report) == [
        "schema_version",
        "plugin_version",
        "environment",
        "run",
        "counts",
        "tests",
        "root_causes",
    ]
    assert report["schema_version"] == SCHEMA_VERSION == 1
    assert report["plugin_version"] == importlib.metadata.version("pytest-torchcompile")
    assert report["run"] is None
    assert report["environment"] == ENVIRONMENT
    assert report["counts"]["checks"] == {
        "pass": 2,
        "fail_accuracy": 1,
        "fail_compile": 0,
        "fail_runtime": 0,
        "eager_fail": 0,
        "eager_nondeterministic": 0,
        "out_of_memory": 0,
        "no_fp64_reference": 1,
        "unconfirmed": 0,
        "handled_error": 0,
        "inconclusive": 0,
        "not_judged": 0,
    }
    assert report["counts"]["tests"] == {
        "pass": 1,
        "fail_accuracy": 1,
        "fail_compile": 0,
        "fail_runtime": 0,
        "eager_fail": 0,
        "eager_nondeterministic": 0,
        "out_of_memory": 0,
        "no_fp64_reference": 1,
        "unconfirmed": 0,
        "handled_error": 0,
        "inconclusive": 0,
        "not_judged": 0,
    }
    assert report["counts"]["baseline"] == {
        "ok": 1,
        "expected_failure": 0,
        "new_failure": 1,
        "improved": 0,
        "missing": 1,
        "flaky": 0,
    }


def test_json_report_tests_are_grouped_sorted_and_aggregated() -> None:
    report = json_report(results(), decisions(), ENVIRONMENT)
    tests = report["tests"]
    assert [t["nodeid"] for t in tests] == [
        "tests/m.py::test_a",
        "tests/m.py::test_b[bf16]",
        "tests/m.py::test_c",
    ]
    test_b = tests[1]
    assert test_b["status"] == "fail_accuracy"
    assert test_b["baseline"] == {
        "kind": "new_failure",
        "message": "fail_accuracy, the baseline expects pass",
        "expected": "pass",
        "fails_run": True,
    }
    assert tests[2]["baseline"]["expected"] is None
    assert [check["case_id"] for check in test_b["checks"]] == ["graph 0", "graph 1"]


def test_json_report_check_has_every_case_result_field() -> None:
    check = json_report(results(), None, ENVIRONMENT)["tests"][1]["checks"][0]
    assert check == {
        "nodeid": "tests/m.py::test_b[bf16]",
        "status": "fail_accuracy",
        "message": "out[0] differs",
        "case_id": "graph 0",
        "reference": "fp64",
        "worst_ratio": 50.0,
        "leaves": [
            {
                "path": "out[0]",
                "shape": [2, 3],
                "dtype": "bfloat16",
                "passed": False,
                "rule": "fp64 rmse",
                "rmse_compiled": 0.5,
                "rmse_eager": 0.01,
                "multiplier": 3.0,
                "max_abs_error": 1.25,
                "max_error_index": [1, 2],
                "detail": "",
            }
        ],
        "repro_path": "repros/a.py",
        "repro_defect": None,
        "repro_unwritten": None,
        "minify": {
            "ops_before": 12,
            "ops_after": 3,
            "seconds": 4.25,
            "compiles": 17,
            "stop": "minimal",
            "path": "repros/min_a.py",
            "kernel_path": "repros/min_a_kernel.py",
            "note": "",
            "ops": [],
            "stage": None,
            "stage_summary": "",
            "failure_type": "",
            "stage_compiles": 0,
            "stage_seconds": 0.0,
            "judge_deaths": [],
            "bug_report_path": None,
            "deviation": [],
            "trajectory": [],
        },
        "compile_seconds": 2.5,
        "graph": "graph 0 (forward)",
        "fallback_random": False,
        "graphs_judged": None,
        "unconfirmed": None,
        "unchecked": [],
    }
    assert CaseResult.from_dict(check) == failing_case()


def test_json_report_without_baseline_and_with_non_finite_floats() -> None:
    nan_leaf = LeafResult(
        "out",
        (1,),
        "float32",
        False,
        "fp64 rmse",
        rmse_compiled=math.nan,
        rmse_eager=0.0,
        max_abs_error=-math.inf,
    )
    result = CaseResult(
        nodeid="t.py::n", status=Status.FAIL_ACCURACY, worst_ratio=math.inf, leaves=[nan_leaf]
    )
    report = json_report([result], None, {})
    assert report["counts"]["baseline"] is None
    assert report["tests"][0]["baseline"] is None
    check = report["tests"][0]["checks"][0]
    assert check["worst_ratio"] == "inf"
    assert check["leaves"][0]["rmse_compiled"] == "nan"
    assert check["leaves"][0]["max_abs_error"] == "-inf"
    json.dumps(report, allow_nan=False)


def test_write_json_report_is_strict_json_equal_to_the_report(tmp_path: Path) -> None:
    path = tmp_path / "out" / "report.json"
    write_json_report(path, results(), decisions(), ENVIRONMENT)
    text = path.read_text(encoding="utf-8")
    assert "Infinity" not in text
    assert json.loads(text) == json_report(results(), decisions(), ENVIRONMENT)
    assert [p.name for p in path.parent.iterdir()] == ["report.json"]


def test_report_environment_names_versions_and_inductor_config() -> None:
    environment = report_environment()
    assert environment["torch"] == torch.__version__
    assert {"python", "triton", "cpu"} <= environment.keys()
    assert isinstance(environment["inductor_config"], dict)


# --- GitHub summary -------------------------------------------------------------------------


def table_rows(markdown: str) -> list[str]:
    return [line for line in markdown.splitlines() if line.startswith("| `")]


def test_github_summary_counts_and_rows_failing_first() -> None:
    markdown = github_summary_markdown(results(), decisions())
    assert markdown.startswith(
        "### pytest-torchcompile\n\n"
        "**Compile accuracy:** 4 checks in 3 tests: 2 pass, 1 fail_accuracy, 1 no_fp64_reference\n\n"
        "**Baseline:** 1 ok, 1 NEW FAILURE, 1 missing\n\n"
        "| test | case | status | worst ratio | graphs | baseline | repro | minified | minify |\n"
        "|---|---|---|---|---|---|---|---|---|\n"
    )
    rows = table_rows(markdown)
    assert rows == [
        "| `tests/m.py::test_b[bf16]` | graph 0 | fail_accuracy | 50.00 | - | NEW FAILURE | `repros/a.py` | "
        "`repros/min_a.py` | 12 -> 3 ops, 4.2 s, 17 compiles |",
        "| `tests/m.py::test_b[bf16]` | graph 1 | pass | inf | - | NEW FAILURE | - | - | - |",
        "| `tests/m.py::test_a` | - | pass | 1.00 | - | ok | - | - | - |",
        "| `tests/m.py::test_c` | - | no_fp64_reference | - | - | missing | - | - | - |",
    ]
    assert markdown.endswith("|\n")


def test_github_summary_without_baseline_puts_failing_checks_first() -> None:
    markdown = github_summary_markdown(results(), None)
    assert "**Baseline:**" not in markdown
    rows = table_rows(markdown)
    assert rows[0].startswith("| `tests/m.py::test_b[bf16]` | graph 0 | fail_accuracy |")
    assert rows[1].startswith("| `tests/m.py::test_a` |")


def test_github_summary_escapes_pipes_and_newlines() -> None:
    result = CaseResult(nodeid="t.py::test[a|b]", status=Status.PASS, case_id="x\ny")
    assert table_rows(github_summary_markdown([result], None)) == [
        "| `t.py::test[a\\|b]` | x y | pass | - | - | - | - | - | - |"
    ]


def test_github_summary_is_capped_with_a_count_of_rows_left_out() -> None:
    many = [
        CaseResult(nodeid=f"tests/t.py::test_{i:04d}[é]", status=Status.PASS) for i in range(500)
    ]
    markdown = github_summary_markdown(many, None, max_bytes=4_000)
    assert len(markdown.encode("utf-8")) <= 4_000
    rows = table_rows(markdown)
    assert 10 < len(rows) < 500
    assert markdown.endswith(f"|\n\n… {500 - len(rows)} more rows\n")
    assert rows[-1].startswith(f"| `tests/t.py::test_{len(rows) - 1:04d}[é]`")


def test_github_summary_under_the_cap_is_complete() -> None:
    markdown = github_summary_markdown(
        results(), None, max_bytes=len(github_summary_markdown(results(), None))
    )
    assert "more rows" not in markdown
    assert len(table_rows(markdown)) == 4


def test_github_summary_cap_too_small_for_the_header() -> None:
    with pytest.raises(ValueError, match="max_bytes=100"):
        github_summary_markdown(results(), None, max_bytes=100)


def test_append_github_summary_keeps_earlier_sections(tmp_path: Path) -> None:
    path = tmp_path / "summary.md"
    path.write_text("## earlier step\n", encoding="utf-8")
    append_github_summary(path, results(), None)
    assert path.read_text(encoding="utf-8") == "## earlier step\n" + github_summary_markdown(
        results(), None
    )


# --- JUnit ----------------------------------------------------------------------------------


def test_junit_properties_of_a_failing_check() -> None:
    assert junit_properties(failing_case(), TerminalLayout().public) == [
        ("torchcompile_case", "graph 0"),
        ("torchcompile_status", "fail_accuracy"),
        ("torchcompile_worst_ratio", "50.00"),
        ("torchcompile_repro", "repros/a.py"),
        ("torchcompile_minified", "repros/min_a.py"),
        ("torchcompile_minify_stop", "minimal"),
        ("torchcompile_reference", "fp64"),
    ]


def test_junit_properties_leave_out_what_is_absent() -> None:
    result = CaseResult(
        nodeid="t.py::a",
        status=Status.NO_FP64_REFERENCE,
        reference="fp32 (cosine)",
        minify=MinifyResult(5, 5, 1.0, 2, StopReason.NOT_REPRODUCED, path=None),
    )
    assert junit_properties(result, TerminalLayout().public) == [
        ("torchcompile_status", "no_fp64_reference"),
        ("torchcompile_minify_stop", "not_reproduced"),
        ("torchcompile_reference", "fp32 (cosine)"),
    ]


# --- checks of plain torch.compile graphs ----------------------------------------------------------

RANDOM = "graph 1 (forward) from tests/p.py:9 (test_p): draws random numbers"


def plain_results() -> list[CaseResult]:
    return [
        CaseResult(
            nodeid="tests/p.py::test_p",
            status=Status.FAIL_ACCURACY,
            case_id="tests_p.py__test_p",
            worst_ratio=9.0,
            graph="graph 2 (backward) from tests/p.py:9 (test_p)",
            graphs_judged=1,
        ),
        CaseResult(
            nodeid="tests/p.py::test_p",
            status=Status.PASS,
            message="3 graph(s) pass, 1 unchecked",
            worst_ratio=1.5,
            graphs_judged=3,
            unchecked=[RANDOM],
        ),
        CaseResult(nodeid="tests/p.py::test_q", status=Status.PASS, worst_ratio=1.0),
    ]


def test_json_report_counts_plain_graphs_per_test_and_in_all() -> None:
    report = json_report(plain_results(), None, {})
    assert report["counts"]["graphs"] == {"judged": 4, "unchecked": 1}
    assert [test["graphs"] for test in report["tests"]] == [{"judged": 4, "unchecked": 1}, None]
    assert report["tests"][0]["checks"][1]["unchecked"] == [RANDOM]
    assert json_report(results(), None, {})["counts"]["graphs"] == {"judged": 0, "unchecked": 0}


def test_plain_graphs_in_the_summary_line_github_and_junit() -> None:
    markdown = github_summary_markdown(plain_results(), None)
    assert (
        "**Compile accuracy:** 3 checks in 2 tests: 2 pass, 1 fail_accuracy; "
        "plain torch.compile graphs: 4 judged, 1 unchecked\n"
    ) in markdown
    assert (
        table_rows(markdown)[1]
        == "| `tests/p.py::test_p` | - | pass | 1.50 | 3 judged, 1 unchecked | - | - | - | - |"
    )
    assert junit_properties(plain_results()[1], TerminalLayout().public) == [
        ("torchcompile_status", "pass"),
        ("torchcompile_worst_ratio", "1.50"),
        ("torchcompile_reference", "fp64"),
        ("torchcompile_graphs_judged", "3"),
        ("torchcompile_unchecked", RANDOM),
    ]
