"""The JSON report (``--compile-accuracy-report``). Its schema (``schema_version`` 1) is documented
in ``docs/reports.md``, the one place it is written; ``tests/unit/reporting/test_report_schema.py``
holds the two together."""

from __future__ import annotations

import importlib.metadata
import json
import math
import os
from collections.abc import Mapping, Sequence
from typing import Any

from pytest_torchcompile.common.files import atomic_write
from pytest_torchcompile.common.results import CaseResult
from pytest_torchcompile.reporting.baseline import Decision, test_status
from pytest_torchcompile.reporting.cells import by_test, graph_counts, outcome_counts, status_counts
from pytest_torchcompile.reporting.grouping import root_causes

SCHEMA_VERSION = 1


def plugin_version() -> str:
    return importlib.metadata.version("pytest-torchcompile")


def _json_safe(value: Any) -> Any:
    """Strict JSON has no NaN or Infinity; spell them as strings (documented in the schema)."""
    if isinstance(value, float) and not math.isfinite(value):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    if isinstance(value, dict):
        return {key: _json_safe(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(item) for item in value]
    return value


def _decision_json(decision: Decision | None) -> dict[str, Any] | None:
    if decision is None:
        return None
    return {
        "kind": str(decision.outcome),
        "message": decision.message,
        "expected": None if decision.expected is None else str(decision.expected),
        "fails_run": decision.fails_run,
    }


def json_report(
    results: Sequence[CaseResult],
    decisions: Mapping[str, Decision] | None,
    environment: Mapping[str, Any],
    run: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The report as JSON-ready data, as docs/reports.md describes it."""
    tests = by_test(results)
    report = {
        "schema_version": SCHEMA_VERSION,
        "plugin_version": plugin_version(),
        "environment": dict(environment),
        "run": None if run is None else dict(run),
        "counts": {
            "checks": status_counts([result.status for result in results]),
            "tests": status_counts([test_status(checks) for _, checks in tests]),
            "baseline": None if decisions is None else outcome_counts(decisions),
            "graphs": graph_counts(results) or {"judged": 0, "unchecked": 0},
        },
        "tests": [
            {
                "nodeid": nodeid,
                "status": str(test_status(checks)),
                "baseline": _decision_json(decisions.get(nodeid))
                if decisions is not None
                else None,
                "graphs": graph_counts(checks),
                "checks": [check.to_dict() for check in checks],
            }
            for nodeid, checks in tests
        ],
        "root_causes": [group.to_dict() for group in root_causes(results)],
    }
    return _json_safe(report)


def write_json_report(
    path: str | os.PathLike[str],
    results: Sequence[CaseResult],
    decisions: Mapping[str, Decision] | None,
    environment: Mapping[str, Any],
    run: Mapping[str, Any] | None = None,
) -> None:
    """Write :func:`json_report` to ``path`` atomically."""
    report = json_report(results, decisions, environment, run)
    atomic_write(path, (json.dumps(report, indent=2, allow_nan=False) + "\n").encode())
