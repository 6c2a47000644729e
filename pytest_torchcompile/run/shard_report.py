"""A shard's JSON report read back for ``merge``: refused, with one line naming the report,
where it is not a whole report of this schema (not JSON, cut short, a field missing or of the
wrong type, nested too deep), and its checks' paths that name no file of their case directory
left out."""

from __future__ import annotations

import dataclasses
import enum
import json
import types
import typing
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path, PurePath
from typing import Any

import pytest

from pytest_torchcompile.common.files import (
    BUG_REPORT_NAME,
    KERNEL_NAME,
    MINIFIED_NAME,
    REPRO_NAME,
    NotARegularFile,
    TooLarge,
    read_bounded,
)
from pytest_torchcompile.common.results import CaseResult
from pytest_torchcompile.common.verdict import Status
from pytest_torchcompile.reporting.grouping import RootCause
from pytest_torchcompile.reporting.json_report import SCHEMA_VERSION
from pytest_torchcompile.run.conclusion import RunRecord
from pytest_torchcompile.run.shard import Shard


class MergeError(Exception):
    """The reports cannot be merged; the message is one line naming the report at fault."""


@dataclass(frozen=True)
class ShardReport:
    """One shard's JSON report, as read back."""

    path: Path
    plugin_version: str
    environment: dict[str, Any]
    statuses: dict[str, str]
    """Each test's aggregated status, by test id."""
    results: list[CaseResult]
    record: RunRecord
    notes: list[str] = dataclasses.field(default_factory=list)
    """A line for each path of the report left out (see :func:`_in_its_case`)."""


MAX_REPORT_BYTES = 256 * 2**20
"""The largest shard report read: some hundred thousand tests' checks; a larger file is no report
(and parsing it would take many times its size in memory)."""


def load_report(path: Path) -> ShardReport:
    """Read one shard's report; :class:`MergeError` when it is not a whole report this merge can use."""
    data = _read_json(path)
    run = _run_of(path, data)
    try:
        tests = data["tests"]
        wrong = mistyped(data, REPORT_FIELDS, "report")
        if wrong is not None:
            raise MergeError(f"{path}: malformed report: {wrong}")
        return _shard_report(path, data, tests, run)
    except (KeyError, TypeError, ValueError) as error:
        raise MergeError(
            f"{path}: truncated or malformed report ({type(error).__name__}: {error})"
        ) from None


def _read_json(path: Path) -> Any:
    """The JSON ``path`` holds, read whole if it is no larger than a report can be."""
    try:
        return json.loads(read_bounded(path, MAX_REPORT_BYTES).decode("utf-8"))
    except FileNotFoundError:
        raise MergeError(f"{path}: no such report") from None
    except NotARegularFile:
        raise MergeError(f"{path}: not a regular file: a report is a JSON file") from None
    except TooLarge:
        raise MergeError(
            f"{path}: larger than {MAX_REPORT_BYTES // 2**20} MiB: not a report"
        ) from None
    except (OSError, UnicodeDecodeError) as error:
        raise MergeError(f"{path}: cannot read the report: {error}") from None
    except json.JSONDecodeError as error:
        raise MergeError(f"{path}: truncated or not JSON ({error})") from None
    except RecursionError:
        raise MergeError(f"{path}: nested too deep to be a report") from None


def _run_of(path: Path, data: Any) -> dict[str, Any]:
    """The report's ``run`` object, where ``data`` is a report of this schema with one."""
    if not isinstance(data, dict) or "schema_version" not in data:
        raise MergeError(f"{path}: not a pytest-torchcompile JSON report (no schema_version)")
    if data["schema_version"] != SCHEMA_VERSION:
        raise MergeError(
            f"{path}: report schema v{data['schema_version']}; this merge reads v{SCHEMA_VERSION}"
        )
    run = data.get("run")
    if "plugin_version" not in data or not isinstance(run, dict):
        raise MergeError(
            f"{path}: the report does not say what its run selected: written by an older "
            "pytest-torchcompile, or not by a test run"
        )
    return run


def _shard_report(
    path: Path, data: dict[str, Any], tests: list[dict[str, Any]], run: dict[str, Any]
) -> ShardReport:
    """A report whose fields are of their types, read."""
    results, notes = _case_files_only(
        [CaseResult.from_dict(check) for test in tests for check in test["checks"]], path
    )
    statuses = {test["nodeid"]: test["status"] for test in tests}
    record = RunRecord(
        results,
        {*run["selected"], *run["deselected"]},
        set(run["selected"]),
        set(run["narrowed_files"]),
        [(failed["nodeid"], failed["when"]) for failed in run["failed"]],
        None if run["shard"] is None else Shard.from_dict(run["shard"]),
        run["exitstatus"],
        run["baseline_sha256"],
        {failed["nodeid"] for failed in run["failed"] if failed["by_check"]},
    )
    environment = data["environment"]
    return ShardReport(path, data["plugin_version"], environment, statuses, results, record, notes)


CASE_FILES = (REPRO_NAME, MINIFIED_NAME, BUG_REPORT_NAME)

REPORT_FIELDS: dict[str, Any] = {
    "plugin_version": str,
    "environment": dict[str, Any],
    "counts": {
        "checks": dict[str, int],
        "tests": dict[str, int],
        "baseline": dict[str, int] | None,
        "graphs": {"judged": int, "unchecked": int},
    },
    "tests": [{"nodeid": str, "status": Status, "checks": [CaseResult]}],
    "root_causes": [RootCause],
    "run": {
        "selected": list[str],
        "deselected": list[str],
        "narrowed_files": list[str],
        "failed": [{"nodeid": str, "when": str, "by_check": bool}],
        "shard": dict[str, Any] | None,
        "exitstatus": pytest.ExitCode | None,
        "baseline_sha256": str | None,
    },
}
"""The types of the report's fields that the merge reads: a dict for an object's fields, a list
of one for a list's items, a class for an object of its fields (a check, a leaf)."""


def _in_its_case(path: str, case_id: str | None) -> bool:
    """Whether ``path`` names one of the files of its check's case directory, wherever the shard
    kept that directory: ``<case id>/<file>``, of a repro, a minified repro, its kernel or its
    bug report, at its end, no ``..`` in it and nothing a terminal would take as a control. A
    report's other paths are neither shown nor linked."""
    parts = PurePath(path).parts
    return (
        path.isprintable()
        and ".." not in parts
        and len(parts) >= 2
        and parts[-2] == case_id
        and (parts[-1] in CASE_FILES or parts[-1].startswith(f"{KERNEL_NAME}."))
    )


def _case_files_only(results: list[CaseResult], report: Path) -> tuple[list[CaseResult], list[str]]:
    """The checks with their paths that name files of their case directory (:func:`_in_its_case`),
    the others left out; a line for each one left out."""
    notes: list[str] = []

    def kept(result: CaseResult, field: str, path: str | None) -> str | None:
        if path is None or _in_its_case(path, result.case_id):
            return path
        notes.append(
            f"WARNING {report}: {result.nodeid}: {field} {shown(path)} left out: not a file of "
            "its case directory"
        )
        return None

    checked = []
    for result in results:
        minify = result.minify and dataclasses.replace(
            result.minify,
            path=kept(result, "minify.path", result.minify.path),
            kernel_path=kept(result, "minify.kernel_path", result.minify.kernel_path),
            bug_report_path=kept(result, "minify.bug_report_path", result.minify.bug_report_path),
        )
        checked.append(
            dataclasses.replace(
                result, repro_path=kept(result, "repro_path", result.repro_path), minify=minify
            )
        )
    return checked, notes


def mistyped(value: Any, hint: Any, where: str) -> str | None:
    """The first part of ``value``, read from JSON, that is not of the type ``hint`` gives (as
    :data:`REPORT_FIELDS` writes types, or a field's annotation), ``where`` naming the whole:
    its path, its value and the type; None where every part is of its type."""
    if dataclasses.is_dataclass(hint):
        hint = _field_types(hint)
    if isinstance(hint, dict):
        return _mistyped_object(value, hint, where)
    origin, arguments = typing.get_origin(hint), typing.get_args(hint)
    if isinstance(hint, list) or origin in (list, tuple):
        return _mistyped_list(value, hint[0] if isinstance(hint, list) else arguments[0], where)
    if origin in (types.UnionType, typing.Union):
        return _mistyped_union(value, arguments, where)
    if origin is dict:
        return _mistyped_mapping(value, arguments[1], where)
    return None if _fits(value, hint) else _wrong(value, _named(hint), where)


def _field_types(cls: Any) -> dict[str, Any]:
    """A dataclass's fields and their types, as :data:`REPORT_FIELDS` writes an object's."""
    hints = typing.get_type_hints(cls)
    return {field.name: hints[field.name] for field in dataclasses.fields(cls)}


def _mistyped_object(value: Any, fields: dict[str, Any], where: str) -> str | None:
    """An object of the given fields; a field it lacks is not looked at here."""
    if not isinstance(value, dict):
        return _wrong(value, "an object", where)
    parts = [
        (value[name], hint, f"{where}.{name}") for name, hint in fields.items() if name in value
    ]
    return _first_mistyped(parts)


def _mistyped_list(value: Any, item: Any, where: str) -> str | None:
    if not isinstance(value, list):
        return _wrong(value, "a list", where)
    return _first_mistyped(
        [(element, item, f"{where}[{index}]") for index, element in enumerate(value)]
    )


def _mistyped_mapping(value: Any, item: Any, where: str) -> str | None:
    """An object of any names, each of type ``item``."""
    if not isinstance(value, dict):
        return _wrong(value, "an object", where)
    return _first_mistyped([(each, item, f"{where}.{name}") for name, each in value.items()])


def _mistyped_union(value: Any, arms: Sequence[Any], where: str) -> str | None:
    if any(mistyped(value, arm, where) is None for arm in arms):
        return None
    given = [arm for arm in arms if arm is not type(None)]
    if value is not None and len(given) == 1:  # an optional field: what is wrong in it
        return mistyped(value, given[0], where)
    return _wrong(value, " or ".join(_named(arm) for arm in arms), where)


def _fits(value: Any, hint: Any) -> bool:
    """Whether ``value`` is of the plain type ``hint`` (a class, an enumeration, or ``Any``)."""
    if hint is Any:
        return True
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return value in [member.value for member in hint]
    if hint in (int, float):
        # JSON's numbers: a float field may hold an integer; true and false are no number.
        return isinstance(value, (int, hint)) and not isinstance(value, bool)
    return isinstance(value, hint)


def _first_mistyped(parts: list[tuple[Any, Any, str]]) -> str | None:
    return next((wrong for part in parts if (wrong := mistyped(*part)) is not None), None)


def _named(hint: Any) -> str:
    if hint is type(None):
        return "null"
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return f"a known {hint.__name__}"
    return {str: "a string", int: "an integer", float: "a number", bool: "true or false"}.get(
        hint, getattr(hint, "__name__", str(hint))
    )


def _wrong(value: Any, expected: str, where: str) -> str:
    return f"{where} is {shown(value)}, not {expected}"


def shown(value: Any) -> str:
    """A value read from a report, as a line shows it: its representation (control characters
    escaped), cut at 40 characters."""
    shown = repr(value)
    return shown if len(shown) <= 40 else shown[:37] + "..."
