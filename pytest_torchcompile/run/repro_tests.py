"""A generated repro file's own test (``pytest repro.py``): the failure kind its marker records,
and its run read as a check, since it judges its graph itself rather than through the fixture."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from pytest_torchcompile.common.kinds import FailureKind
from pytest_torchcompile.common.results import CaseResult
from pytest_torchcompile.common.settings import REPRO_KIND
from pytest_torchcompile.common.verdict import Status

REPRO_STATUSES = {
    str(kind): status for kind in FailureKind if (status := Status.recorded(kind)) is not None
}
"""A generated repro's failure kinds, as its marker and its verdict line name them, and the status
of each."""
# A generated repro's assertion message: its verdict line, e.g. "compile_error: RuntimeError: ...".
_REPRO_VERDICT = re.compile(rf"^(?:E\s+)?({'|'.join(REPRO_STATUSES)})\b", re.MULTILINE)


def recorded_kind(item: pytest.Item) -> str | None:
    """The failure kind a generated repro test records: its marker's ``kind``, where the test is
    its repro file's own (``test_repro``, in a module whose ``KIND`` is that kind, one a repro is
    written with); None for any other test, whose marker cannot give ``kind``."""
    marker = item.get_closest_marker("inductor_repro")
    kind = marker.kwargs.get(REPRO_KIND) if marker is not None else None
    if (
        kind in REPRO_STATUSES
        and getattr(item, "originalname", None) == "test_repro"
        and getattr(getattr(item, "module", None), "KIND", None) == kind
    ):
        return str(kind)
    return None


def repro_test_result(item: pytest.Item, report: pytest.TestReport) -> CaseResult | None:
    """The check of a generated repro test (``pytest repro.py``), which judges its graph itself
    rather than through the fixture: ``pass`` when it passes (the bug is fixed), the recorded
    failure kind of its marker when it reproduces, the kind it printed when it fails differently.
    None for any other test, and for a repro test that failed for an unrelated reason."""
    kind = recorded_kind(item)
    if kind is None:
        return None
    path = Path(str(item.path))

    def made(status: Status, message: str) -> CaseResult:
        return CaseResult(
            item.nodeid, status, message, case_id=path.parent.name, repro_path=str(path)
        )

    if report.passed:
        return made(Status.PASS, f"the repro no longer fails ({kind} recorded)")
    if not report.failed:
        return None
    text = report.longreprtext
    if "REPRODUCED" in text:
        return made(REPRO_STATUSES[kind], f"the repro still fails: {kind}")
    verdicts = _REPRO_VERDICT.findall(text) if "FAILS DIFFERENTLY" in text else []
    if verdicts:
        return made(
            REPRO_STATUSES[verdicts[-1]],
            f"the repro fails differently: {verdicts[-1]}, recorded {kind}",
        )
    return None
