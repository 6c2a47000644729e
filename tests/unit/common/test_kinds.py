"""The one vocabulary of what went wrong (``common/kinds.FailureKind``) and its one table to a
check's status."""

from __future__ import annotations

from pytest_torchcompile.common.kinds import FailureKind
from pytest_torchcompile.common.verdict import Status

RECORDED = {
    FailureKind.ACCURACY,
    FailureKind.COMPILE_ERROR,
    FailureKind.RUNTIME_ERROR,
    FailureKind.EAGER_ERROR,
}
"""The kinds a repro file records; the others are failures of the judging."""


def test_every_kind_a_repro_records_has_a_status_and_back() -> None:
    for kind in FailureKind:
        status = Status.recorded(kind)
        assert (status is not None) == (kind in RECORDED), kind
        if status is not None:
            assert status.failure_kind is kind


def test_each_compiler_failure_status_records_a_kind() -> None:
    for status in Status:
        if status.is_compiler_failure:
            assert status.failure_kind in RECORDED, status
    assert Status.PASS.failure_kind is None and Status.UNCONFIRMED.failure_kind is None


def test_a_kind_is_its_word_in_files_and_reports() -> None:
    assert [str(kind) for kind in FailureKind] == [kind.value for kind in FailureKind]
    assert f"{FailureKind.COMPILE_ERROR}" == "compile_error" and FailureKind.ACCURACY == "accuracy"
