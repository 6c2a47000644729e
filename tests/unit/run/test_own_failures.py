"""A test's own failure stands as in a plain run, whatever the baseline says. The model's own
error in eager (``eager_fail``) is neither recorded nor judged by a baseline, and only the failure
a check raised into its test (``CheckFailed``) becomes an expected failure: in the test's process,
in a recording run's exit status and in the merge of a split run's shards."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from pytest_torchcompile.__main__ import main
from pytest_torchcompile.common.results import CaseResult
from pytest_torchcompile.common.settings import CheckSettings, GatingSettings
from pytest_torchcompile.common.verdict import CheckFailed, Status
from pytest_torchcompile.reporting.baseline import Gate
from pytest_torchcompile.reporting.baseline_file import HEADER, BaselineError, load_baseline
from pytest_torchcompile.reporting.json_report import write_json_report
from pytest_torchcompile.run.conclusion import RunEnd, RunRecord
from pytest_torchcompile.run.session import AccuracySession


def check(nodeid: str, status: Status) -> CaseResult:
    return CaseResult(nodeid, status, f"{status} here")


def baseline_of(tmp_path: Path, rows: str) -> Path:
    path = tmp_path / "baseline.txt"
    path.write_text(f"{HEADER}\n{rows}")
    return path


def test_a_recording_run_writes_no_row_for_the_models_own_error(tmp_path: Path) -> None:
    path = baseline_of(tmp_path, "t.py::kept\tfail_accuracy\tbug 1\n")
    gate = Gate.load(path, update=True)
    results = [
        check("t.py::own", Status.EAGER_FAIL),
        check("t.py::kept", Status.EAGER_FAIL),
        check("t.py::both", Status.EAGER_FAIL),
        check("t.py::both", Status.FAIL_ACCURACY),
    ]
    gate.update_file(results)
    # The row of a test whose only check is the model's error is kept as it was, as a test's
    # that ran no check; a test with another check is recorded by that one.
    assert path.read_text() == (
        f"{HEADER}\nt.py::both\tfail_accuracy\nt.py::kept\tfail_accuracy\tbug 1\n"
    )


def test_the_gate_judges_a_test_by_its_checks_but_the_models_own_error(tmp_path: Path) -> None:
    gate = Gate.load(baseline_of(tmp_path, "t.py::own\tpass\nt.py::flaky\tflaky\n"))
    own = [check("t.py::own", Status.EAGER_FAIL)]
    assert gate.decide("t.py::own", own) is None
    assert gate.xfail_reason("t.py::flaky", [check("t.py::flaky", Status.EAGER_FAIL)]) is None
    # A test that handled its model's error (a pytest.raises around the call) passes plainly:
    # no NEW FAILURE fails its run.
    handled = [check("t.py::handled", Status.EAGER_FAIL)]
    assert gate.decisions(own + handled) == {}
    both = [*own, check("t.py::own", Status.FAIL_ACCURACY)]
    decided = gate.decide("t.py::own", both)
    assert decided is not None and decided.status is Status.FAIL_ACCURACY


def test_an_eager_fail_row_is_refused_naming_its_line(tmp_path: Path) -> None:
    path = baseline_of(tmp_path, "t.py::a\tpass\nt.py::own\teager_fail\n")
    with pytest.raises(BaselineError) as refused:
        load_baseline(path)
    assert str(refused.value) == (
        f"{path}:3: t.py::own has status eager_fail, which no baseline records: the model's own "
        "error fails its test as a plain run does; delete the row"
    )
    (tmp_path / "other.txt").write_text("t.py::a\teager_fails\n")
    with pytest.raises(BaselineError) as unknown:
        load_baseline(tmp_path / "other.txt")
    assert "eager_nondeterministic" in str(unknown.value)
    assert "eager_fail," not in str(unknown.value)


def raised(error: BaseException) -> pytest.ExceptionInfo[BaseException]:
    with pytest.raises(BaseException) as caught:
        raise error
    return caught


def test_a_check_failure_reads_as_pytest_failure() -> None:
    failure = raised(CheckFailed("compile accuracy: fail_accuracy", pytrace=False))
    assert failure.exconly() == "Failed: compile accuracy: fail_accuracy"
    assert failure.errisinstance(pytest.fail.Exception)


def own_error() -> BaseException:
    return RuntimeError("the test's own error")


def check_failure() -> BaseException:
    return CheckFailed("compile accuracy: fail_accuracy", pytrace=False)


def failed_call(
    tmp_path: Path, request: pytest.FixtureRequest, error: BaseException, update: bool
) -> tuple[pytest.TestReport, RunEnd]:
    """One test call that failed with ``error`` after a check of fail_accuracy, through a session
    as the plugin drives it: its report, and the run's end. The baseline records the failure;
    a recording run (``update``) starts from an empty one."""
    nodeid = request.node.nodeid
    path = baseline_of(tmp_path, "" if update else f"{nodeid}\tfail_accuracy\thttps://bugs/1\n")
    session = AccuracySession(True, tmp_path / "repros", CheckSettings(), lambda: {})
    session.configure_gating(GatingSettings(path, update, False, None))
    session.record(check(nodeid, Status.FAIL_ACCURACY))
    report = pytest.TestReport(nodeid, ("t.py", 1, "t"), {}, "failed", str(error), "call")
    session.annotate_report(request.node, report, raised(error))
    session.receive_report(report)
    return report, session.end_run(set())


def test_a_failure_the_check_raised_is_excused(
    tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    report, end = failed_call(tmp_path, request, check_failure(), update=False)
    assert report.skipped and "expected failure" in report.wasxfail
    assert end.failures == []


def test_a_failure_of_the_tests_own_is_not_excused(
    tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    report, end = failed_call(tmp_path, request, own_error(), update=False)
    assert report.failed and not hasattr(report, "wasxfail")
    ((heading, note),) = report.sections
    assert heading == "compile accuracy baseline"
    assert " ".join(note.split()).startswith(
        "not excused: the test failed with its own error, as in a plain run; compile accuracy "
        "expected failure: still fail_accuracy"
    )
    assert end.exit_status(pytest.ExitCode.TESTS_FAILED, 1) == pytest.ExitCode.TESTS_FAILED


@pytest.mark.parametrize(
    ("error", "status"),
    [(check_failure, pytest.ExitCode.OK), (own_error, pytest.ExitCode.TESTS_FAILED)],
    ids=["check", "own"],
)
def test_a_recording_run_passes_only_where_checks_failed_the_tests(
    tmp_path: Path,
    request: pytest.FixtureRequest,
    error: Callable[[], BaseException],
    status: int,
) -> None:
    report, end = failed_call(tmp_path, request, error(), update=True)
    assert report.failed
    assert end.exit_status(pytest.ExitCode.TESTS_FAILED, 1) == status


@pytest.mark.parametrize(("by_check", "status"), [(True, 0), (False, 1)], ids=["check", "own"])
def test_the_merge_excuses_only_what_checks_failed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], by_check: bool, status: int
) -> None:
    """A shard run without the baseline counted the failure; the merge, given the baseline,
    excuses it only where the test's check failed it."""
    nodeid = "tests/test_m.py::test_a"
    baseline = baseline_of(tmp_path, f"{nodeid}\tfail_accuracy\n")
    results = [check(nodeid, Status.FAIL_ACCURACY)]
    record = RunRecord(
        results,
        [nodeid],
        [nodeid],
        [],
        [(nodeid, "call")],
        exitstatus=pytest.ExitCode.TESTS_FAILED,
        failed_by_check={nodeid} if by_check else set(),
    )
    shard = tmp_path / "shard.json"
    write_json_report(shard, results, None, {"torch": "2.13.0"}, record.to_json())
    assert main(["merge", os.fspath(shard), "--baseline", os.fspath(baseline)]) == status
    capsys.readouterr()
