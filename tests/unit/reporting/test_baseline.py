from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from pytest_torchcompile.common.results import CaseResult
from pytest_torchcompile.common.verdict import Status
from pytest_torchcompile.reporting import baseline_file
from pytest_torchcompile.reporting.baseline import (
    STATUS_PRIORITY,
    BaselineOutcome,
    decide,
    unknown_entries,
)
from pytest_torchcompile.reporting.baseline import test_status as aggregate_status
from pytest_torchcompile.reporting.baseline_file import (
    FLAKY,
    HEADER,
    Baseline,
    BaselineEntry,
    BaselineError,
    load_baseline,
    write_baseline,
)


def write(tmp_path: Path, text: str, name: str = "baseline.txt") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def make_baseline(*entries: BaselineEntry) -> Baseline:
    return Baseline(Path("baseline.txt"), {entry.test_id: entry for entry in entries})


# --- loading --------------------------------------------------------------------------------


def test_load_reads_rows_notes_flaky_and_skips_comments(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        (
            f"{HEADER}\n"
            "\n"
            "# a remark\n"
            "tests/a.py::test_x[bf16]\tfail_accuracy\thttps://github.com/pytorch/pytorch/issues/1\n"
            "tests/a.py::test_y\tpass\n"
            "tests/b.py::test_z\tflaky\tthread count\tdependent\n"
            "tests/b.py::test_w[a b]\t no_fp64_reference \n"
        ),
    )
    loaded = load_baseline(path)
    assert loaded.path == path
    assert list(loaded.entries) == [
        "tests/a.py::test_x[bf16]",
        "tests/a.py::test_y",
        "tests/b.py::test_z",
        "tests/b.py::test_w[a b]",
    ]
    assert loaded.entries["tests/a.py::test_x[bf16]"] == BaselineEntry(
        "tests/a.py::test_x[bf16]",
        Status.FAIL_ACCURACY,
        "https://github.com/pytorch/pytorch/issues/1",
        4,
    )
    assert loaded.entries["tests/a.py::test_y"] == BaselineEntry(
        "tests/a.py::test_y", Status.PASS, "", 5
    )
    flaky = loaded.entries["tests/b.py::test_z"]
    assert flaky.expected == FLAKY and flaky.is_flaky
    assert flaky.note == "thread count\tdependent"
    assert loaded.entries["tests/b.py::test_w[a b]"].expected is Status.NO_FP64_REFERENCE
    assert not loaded.entries["tests/a.py::test_y"].is_flaky


def test_load_accepts_a_file_without_header(tmp_path: Path) -> None:
    loaded = load_baseline(write(tmp_path, "t.py::test_a\tfail_compile\n"))
    assert loaded.entries["t.py::test_a"].expected is Status.FAIL_COMPILE


@pytest.mark.parametrize(
    ("text", "line", "fragment"),
    [
        ("t.py::a\tpass\nt.py::b fail_accuracy\n", 2, "malformed row 't.py::b fail_accuracy'"),
        ("# c\nt.py::a\t\n", 2, "malformed row"),
        ("\tpass\n", 1, "malformed row"),
        ("t.py::a\tpass\n\nt.py::b\tfailed\tnote\n", 3, "unknown status 'failed' for t.py::b"),
        ("t.py::a\tPASS\n", 1, "unknown status 'PASS'"),
        (
            "t.py::a\tpass\nt.py::b\tpass\nt.py::a\tflaky\n",
            3,
            "duplicate test id t.py::a (first listed on line 1)",
        ),
        (
            "# pytest-torchcompile baseline v2\nt.py::a\tpass\n",
            1,
            "baseline format v2 is not supported",
        ),
    ],
)
def test_load_errors_name_file_and_line(
    tmp_path: Path, text: str, line: int, fragment: str
) -> None:
    path = write(tmp_path, text)
    with pytest.raises(BaselineError) as raised:
        load_baseline(path)
    message = str(raised.value)
    assert message.startswith(f"{path}:{line}: ")
    assert fragment in message


def test_unknown_status_message_lists_the_allowed_values(tmp_path: Path) -> None:
    with pytest.raises(
        BaselineError,
        match=r"expected one of pass, fail_accuracy, .*no_fp64_reference, unconfirmed, handled_error, inconclusive, not_judged, flaky",
    ):
        load_baseline(write(tmp_path, "t.py::a\tfailed\n"))


def test_load_missing_or_undecodable_file(tmp_path: Path) -> None:
    with pytest.raises(BaselineError, match=r"nope\.txt: baseline file not found"):
        load_baseline(tmp_path / "nope.txt")
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"t.py::a\t\xff\n")
    with pytest.raises(BaselineError, match=r"bad\.txt: cannot read baseline file"):
        load_baseline(bad)


# --- writing --------------------------------------------------------------------------------


def test_write_round_trip_keeps_untouched_rows_notes_and_flaky(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        (
            f"{HEADER}\n"
            "# this remark is not kept\n"
            "t.py::c_not_run\tfail_runtime\tbug 3\n"
            "t.py::a_fixed\tfail_accuracy\tbug 1\n"
            "t.py::b_flaky\tflaky\tsometimes\n"
        ),
    )
    previous = load_baseline(path)
    write_baseline(
        path,
        {
            "t.py::a_fixed": Status.PASS,
            "t.py::b_flaky": Status.FAIL_COMPILE,
            "t.py::d_new": Status.FAIL_ACCURACY,
        },
        previous,
    )
    assert path.read_text(encoding="utf-8") == (
        f"{HEADER}\n"
        "t.py::a_fixed\tpass\tbug 1\n"
        "t.py::b_flaky\tflaky\tsometimes\n"
        "t.py::c_not_run\tfail_runtime\tbug 3\n"
        "t.py::d_new\tfail_accuracy\n"
    )
    reloaded = load_baseline(path)
    assert {test_id: (e.expected, e.note) for test_id, e in reloaded.entries.items()} == {
        "t.py::a_fixed": (Status.PASS, "bug 1"),
        "t.py::b_flaky": (FLAKY, "sometimes"),
        "t.py::c_not_run": (Status.FAIL_RUNTIME, "bug 3"),
        "t.py::d_new": (Status.FAIL_ACCURACY, ""),
    }


def test_write_without_previous_creates_directories_and_sorts(tmp_path: Path) -> None:
    path = tmp_path / "ci" / "baseline.txt"
    write_baseline(path, {"t.py::z": Status.PASS, "t.py::a": Status.FAIL_RUNTIME}, None)
    assert path.read_text(encoding="utf-8") == f"{HEADER}\nt.py::a\tfail_runtime\nt.py::z\tpass\n"
    assert stat.S_IMODE(path.stat().st_mode) == 0o644


@pytest.mark.parametrize(
    "test_id",
    [
        "t.py::a\tb",
        "t.py::a\nb",
        "",
        " t.py::a",
        "#t.py::a",
        '"t.py::a"',
        "t.py::a[\x1b[31m]",
        "t.py::a[\u2028]",
        "t.py::a[\x85]",
    ],
)
def test_ids_a_row_cannot_hold_as_they_are_are_stored_as_json_and_read_back(
    tmp_path: Path, test_id: str
) -> None:
    path = tmp_path / "baseline.txt"
    others = {f"t.py::other{i}": Status.PASS for i in range(3)}
    write_baseline(path, {test_id: Status.FAIL_ACCURACY, **others}, None)
    rows = path.read_text(encoding="utf-8").splitlines()
    assert f"{json.dumps(test_id)}\tfail_accuracy" in rows
    loaded = load_baseline(path)
    assert {entry.test_id: entry.expected for entry in loaded.entries.values()} == {
        test_id: Status.FAIL_ACCURACY,
        **others,
    }


def test_an_id_pytest_escaped_is_stored_as_pytest_shows_it(tmp_path: Path) -> None:
    path = tmp_path / "baseline.txt"
    write_baseline(path, {"t.py::a[\\u00e9]": Status.PASS}, None)
    assert path.read_text(encoding="utf-8") == f"{HEADER}\nt.py::a[\\u00e9]\tpass\n"


def test_a_quoted_id_that_is_no_json_string_is_one_line(tmp_path: Path) -> None:
    path = write(tmp_path, '"t.py::a\tpass\n')
    with pytest.raises(
        BaselineError, match=r"baseline.txt:1: test id \"t.py::a starts with a quote"
    ):
        load_baseline(path)


def test_write_keeps_file_mode_and_leaves_no_temporary_files(tmp_path: Path) -> None:
    path = write(tmp_path, "t.py::a\tpass\n")
    path.chmod(0o640)
    write_baseline(path, {"t.py::a": Status.FAIL_ACCURACY}, load_baseline(path))
    assert stat.S_IMODE(path.stat().st_mode) == 0o640
    assert sorted(p.name for p in tmp_path.iterdir()) == ["baseline.txt"]


def test_write_failure_leaves_the_old_file_intact(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = write(tmp_path, "t.py::a\tpass\n")

    def failing_replace(source: str, target: str) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(baseline_file.os, "replace", failing_replace)
    with pytest.raises(OSError, match="disk full"):
        write_baseline(path, {"t.py::a": Status.FAIL_ACCURACY}, None)
    assert path.read_text(encoding="utf-8") == "t.py::a\tpass\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["baseline.txt"]


# --- aggregation ----------------------------------------------------------------------------


def case(status: Status, nodeid: str = "t.py::a") -> CaseResult:
    return CaseResult(nodeid=nodeid, status=status)


def test_status_priority_lists_every_status_once() -> None:
    assert sorted(STATUS_PRIORITY) == sorted(Status)
    assert len(STATUS_PRIORITY) == len(set(STATUS_PRIORITY))


@pytest.mark.parametrize(
    ("statuses", "expected"),
    [
        ([Status.PASS], Status.PASS),
        ([Status.PASS, Status.NO_FP64_REFERENCE, Status.PASS], Status.NO_FP64_REFERENCE),
        ([Status.NO_FP64_REFERENCE, Status.EAGER_NONDETERMINISTIC], Status.EAGER_NONDETERMINISTIC),
        ([Status.EAGER_NONDETERMINISTIC, Status.EAGER_FAIL], Status.EAGER_FAIL),
        ([Status.EAGER_FAIL, Status.FAIL_ACCURACY, Status.PASS], Status.FAIL_ACCURACY),
        ([Status.FAIL_ACCURACY, Status.FAIL_RUNTIME], Status.FAIL_RUNTIME),
        ([Status.FAIL_RUNTIME, Status.FAIL_COMPILE, Status.FAIL_ACCURACY], Status.FAIL_COMPILE),
    ],
)
def test_test_status_picks_the_most_important(statuses: list[Status], expected: Status) -> None:
    assert aggregate_status([case(s) for s in statuses]) is expected
    assert aggregate_status([case(s) for s in reversed(statuses)]) is expected


def test_test_status_needs_results() -> None:
    with pytest.raises(ValueError, match="at least one"):
        aggregate_status([])


# --- decisions ------------------------------------------------------------------------------


NOTED = BaselineEntry("t.py::a", Status.FAIL_ACCURACY, "https://bugs/1")


@pytest.mark.parametrize("strict", [False, True])
@pytest.mark.parametrize(
    ("entry", "status", "outcome", "fails_run", "message"),
    [
        (BaselineEntry("t.py::a", Status.PASS), Status.PASS, BaselineOutcome.OK, False, "pass"),
        (
            BaselineEntry("t.py::a", Status.PASS),
            Status.NO_FP64_REFERENCE,
            BaselineOutcome.OK,
            False,
            "no_fp64_reference",
        ),
        (
            BaselineEntry("t.py::a", Status.NO_FP64_REFERENCE),
            Status.PASS,
            BaselineOutcome.OK,
            False,
            "pass",
        ),
        (
            BaselineEntry("t.py::a", Status.PASS),
            Status.FAIL_RUNTIME,
            BaselineOutcome.NEW_FAILURE,
            True,
            "fail_runtime, the baseline expects pass",
        ),
        (
            BaselineEntry("t.py::a", Status.PASS),
            Status.OUT_OF_MEMORY,
            BaselineOutcome.NEW_FAILURE,
            True,
            "out_of_memory, the baseline expects pass",
        ),
        (
            NOTED,
            Status.FAIL_ACCURACY,
            BaselineOutcome.EXPECTED_FAILURE,
            False,
            "still fail_accuracy, as the baseline records [https://bugs/1]",
        ),
        (
            BaselineEntry("t.py::a", Status.EAGER_NONDETERMINISTIC),
            Status.EAGER_NONDETERMINISTIC,
            BaselineOutcome.OK,
            False,
            "eager_nondeterministic",
        ),
        (
            BaselineEntry("t.py::a", Status.PASS),
            Status.EAGER_NONDETERMINISTIC,
            BaselineOutcome.OK,
            False,
            "eager_nondeterministic",
        ),
        (
            NOTED,
            Status.FAIL_COMPILE,
            BaselineOutcome.NEW_FAILURE,
            True,
            "fail_compile, a different failure than the baseline's fail_accuracy [https://bugs/1]",
        ),
        (
            BaselineEntry("t.py::a", FLAKY, "racy"),
            Status.FAIL_COMPILE,
            BaselineOutcome.FLAKY,
            False,
            "fail_compile (flaky in the baseline) [racy]",
        ),
        (
            BaselineEntry("t.py::a", FLAKY),
            Status.PASS,
            BaselineOutcome.FLAKY,
            False,
            "pass (flaky in the baseline)",
        ),
        (
            None,
            Status.PASS,
            BaselineOutcome.MISSING,
            False,
            "pass; the test is not in the baseline",
        ),
        (
            None,
            Status.NO_FP64_REFERENCE,
            BaselineOutcome.MISSING,
            False,
            "no_fp64_reference; the test is not in the baseline",
        ),
        (
            None,
            Status.FAIL_ACCURACY,
            BaselineOutcome.NEW_FAILURE,
            True,
            "fail_accuracy, and the test is not in the baseline",
        ),
    ],
)
def test_decide_outcomes_that_ignore_strict(
    strict: bool,
    entry: BaselineEntry | None,
    status: Status,
    outcome: BaselineOutcome,
    fails_run: bool,
    message: str,
) -> None:
    known = (
        make_baseline(entry) if entry else make_baseline(BaselineEntry("t.py::other", Status.PASS))
    )
    decision = decide("t.py::a", status, known, strict=strict)
    assert decision.outcome is outcome
    assert decision.fails_run is fails_run
    assert decision.message == message
    assert decision.status is status
    assert decision.expected == (entry.expected if entry else None)


def test_decide_improved_fails_the_run_only_when_strict() -> None:
    known = make_baseline(NOTED)
    lenient = decide("t.py::a", Status.PASS, known, strict=False)
    assert (lenient.outcome, lenient.fails_run) == (BaselineOutcome.IMPROVED, False)
    assert lenient.message == "pass, the baseline expects fail_accuracy [https://bugs/1]"
    strict = decide("t.py::a", Status.NO_FP64_REFERENCE, known, strict=True)
    assert (strict.outcome, strict.fails_run) == (BaselineOutcome.IMPROVED, True)
    assert strict.message == (
        "no_fp64_reference, the baseline expects fail_accuracy (strict: record it in the baseline) [https://bugs/1]"
    )


def test_decision_labels_shout_what_needs_attention() -> None:
    assert BaselineOutcome.IMPROVED.label == "IMPROVED"
    assert BaselineOutcome.NEW_FAILURE.label == "NEW FAILURE"
    assert BaselineOutcome.EXPECTED_FAILURE.label == "expected failure"


# --- unknown entries ------------------------------------------------------------------------


def test_unknown_entries_are_rows_of_collected_files_that_were_not_collected() -> None:
    known = make_baseline(
        BaselineEntry("tests/a.py::test_renamed_old", Status.PASS),
        BaselineEntry("tests/a.py::test_kept[x::y]", Status.PASS),
        BaselineEntry("tests/a.py::Cls::test_gone", Status.FAIL_ACCURACY),
        BaselineEntry("tests/b.py::test_not_in_this_run", Status.PASS),
    )
    collected = [
        "tests/a.py::test_kept[x::y]",
        "tests/a.py::test_renamed_new",
        "tests/c.py::test_c",
    ]
    assert [entry.test_id for entry in unknown_entries(known, collected)] == [
        "tests/a.py::Cls::test_gone",
        "tests/a.py::test_renamed_old",
    ]
    assert unknown_entries(known, iter(["tests/c.py::test_c"])) == []


def test_write_baseline_accepts_str_paths(tmp_path: Path) -> None:
    path = os.fspath(tmp_path / "b.txt")
    write_baseline(path, {"t.py::a": Status.PASS}, None)
    assert load_baseline(path).entries["t.py::a"].expected is Status.PASS
