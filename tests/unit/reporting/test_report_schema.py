"""The JSON report's schema is written once, in docs/reports.md: every field a report holds is
named there, and every field named there is one a report holds."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path
from typing import Any

from test_report import decisions, results

from pytest_torchcompile.common.leaves import LeafResult
from pytest_torchcompile.common.results import (
    CaseResult,
    Deviation,
    MinifyResult,
    MinifyStep,
    StopReason,
)
from pytest_torchcompile.common.verdict import Status
from pytest_torchcompile.reporting.json_report import json_report

DOCS = Path(__file__).parents[3] / "docs" / "reports.md"

FREE_FORM = {"inductor_config", "checks", "tests", "baseline"}
"""Objects whose keys are data, not fields: config names, status and outcome names (``counts``'
``checks``, ``tests`` and ``baseline``; the same names elsewhere are fields)."""

ENVIRONMENT = {
    "torch": "2.13.0",
    "triton": "not installed",
    "python": "3.11.7",
    "cpu": "x86_64",
    "cuda_device": "H100",
    "cuda": "12.8",
    "inductor_config": {"cpp.threads": 2},
    "features_off": [{"feature": "f", "internal": "torch.x", "instead": "y"}],
}
RUN = {
    "shard": {"splitter": "pytest-split", "index": 1, "count": 2},
    "selected": [],
    "deselected": [],
    "narrowed_files": [],
    "failed": [{"nodeid": "t.py::a", "when": "call", "by_check": True}],
    "exitstatus": 1,
    "baseline_sha256": None,
}


def _fields(value: Any, parent: str = "", inside_counts: bool = False) -> set[str]:
    found: set[str] = set()
    if isinstance(value, dict):
        for key, item in value.items():
            if not (inside_counts and parent in FREE_FORM) and parent != "inductor_config":
                found.add(key)
            found |= _fields(item, key, inside_counts or key == "counts")
    elif isinstance(value, list):
        for item in value:
            found |= _fields(item, parent, inside_counts)
    return found


def _documented() -> set[str]:
    section = DOCS.read_text().split("## JSON report", 1)[1].split("\n## ", 1)[0]
    return set(re.findall(r"`([a-z_][a-z0-9_]*)`", section))


def _report() -> dict[str, Any]:
    attributed = CaseResult(
        nodeid="t.py::d",
        status=Status.FAIL_ACCURACY,
        minify=MinifyResult(
            9,
            2,
            1.0,
            5,
            StopReason.MINIMAL,
            path="m.py",
            ops=["aten.relu"],
            stage="inductor.lowering",
            stage_summary="Inductor's lowering of aten.relu",
            failure_type="accuracy",
            deviation=[Deviation("relu", "aten.relu", 9.5, False, True)],
            trajectory=[MinifyStep(0.5, 9, 1)],
        ),
    )
    return json_report([*results(), attributed], decisions(), ENVIRONMENT, RUN)


def _report_fields() -> set[str]:
    report = _report()
    classes = (CaseResult, MinifyResult, LeafResult, Deviation, MinifyStep)
    return _fields(report) | {field.name for cls in classes for field in dataclasses.fields(cls)}


def test_every_field_of_a_report_is_documented() -> None:
    missing = _report_fields() - _documented()
    assert not missing, (
        f"fields of the JSON report that docs/reports.md does not name: {sorted(missing)}"
    )


def test_every_documented_name_is_a_field_or_a_value_of_one() -> None:
    report = _report()
    values = {
        name for counts in report["counts"].values() if isinstance(counts, dict) for name in counts
    }
    values |= {
        "inf",
        "nan",
        "fp64",
        "null",
        "flaky",
        "accuracy",
        "setup",
        "call",
        "teardown",
        "minimal",
        "time_budget",
        "decompositions",
        "not_reproduced",
        "repro_broken",
        "crashed",
        "interrupted",
        "unwritten",
    }
    stale = _documented() - _report_fields() - values
    assert not stale, (
        f"names docs/reports.md gives the JSON report that no report holds: {sorted(stale)}"
    )
