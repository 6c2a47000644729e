"""``python -m pytest_torchcompile merge REPORT...``: the JSON reports of a suite split over
machines (pytest-split, pytest-shard), judged as one run.

The union of the shards' checks goes through the same end of run as a single run
(``conclusion.conclude_run``): the same baseline outcomes, terminal lines, files and exit status. The
merge refuses, with one line, reports it cannot add up: of another report schema or another
plugin version than each other, a test in two reports with different statuses, a report cut short
(not JSON, fields missing) or malformed (a field of the wrong type, JSON nested too deep), shards
of different splits, or a shard of the split without a report. A check's paths that name no file
of its case directory are left out, each with a warning line: the merge shows and links nothing
else a report names.

Exit status: as the single run's (0 passes, 1 fails, a shard's unusual pytest status such as 2,
interrupted, is passed on); 4 when the merge refuses its input.
"""

from __future__ import annotations

import argparse
import dataclasses
import enum
import json
import shutil
import sys
import types
import typing
from collections.abc import Collection, Sequence
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
    clashing_paths,
    read_bounded,
)
from pytest_torchcompile.common.results import CaseResult
from pytest_torchcompile.common.verdict import Status
from pytest_torchcompile.reporting.baseline import BaselineError, Gate
from pytest_torchcompile.reporting.grouping import RootCause
from pytest_torchcompile.reporting.json_report import SCHEMA_VERSION
from pytest_torchcompile.reporting.layout import TerminalLayout
from pytest_torchcompile.run.conclusion import RunEnd, RunRecord, conclude_run, file_digest
from pytest_torchcompile.run.merge_repros import ReproDirError, merge_repro_dirs
from pytest_torchcompile.run.report_files import report_files, writing
from pytest_torchcompile.run.session import INI_FILE, test_inputs
from pytest_torchcompile.run.shard import Shard

REFUSED = 4
"""The merge's exit status when it refuses its input (pytest's for a usage error)."""

# pytest's exit statuses a shard may end with that say nothing beyond its tests' reports.
_ORDINARY_EXIT = (
    pytest.ExitCode.OK,
    pytest.ExitCode.TESTS_FAILED,
    pytest.ExitCode.NO_TESTS_COLLECTED,
)


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
    try:
        data = json.loads(read_bounded(path, MAX_REPORT_BYTES).decode("utf-8"))
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
    try:
        tests = data["tests"]
        wrong = _mistyped(data, REPORT_FIELDS, "report")
        if wrong is not None:
            raise MergeError(f"{path}: malformed report: {wrong}")
        results, notes = _case_files_only(
            [CaseResult.from_dict(check) for test in tests for check in test["checks"]], path
        )
        statuses = {test["nodeid"]: test["status"] for test in tests}
        shard = None if run["shard"] is None else Shard.from_dict(run["shard"])
        record = RunRecord(
            results,
            {*run["selected"], *run["deselected"]},
            set(run["selected"]),
            set(run["narrowed_files"]),
            [(f["nodeid"], f["when"]) for f in run["failed"]],
            shard,
            run["exitstatus"],
            run["baseline_sha256"],
            {f["nodeid"] for f in run["failed"] if f["by_check"]},
        )
        return ShardReport(
            path, data["plugin_version"], data["environment"], statuses, results, record, notes
        )
    except (KeyError, TypeError, ValueError) as error:
        raise MergeError(
            f"{path}: truncated or malformed report ({type(error).__name__}: {error})"
        ) from None


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
            f"WARNING {report}: {result.nodeid}: {field} {_shown(path)} left out: not a file of "
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


def _mistyped(value: Any, hint: Any, where: str) -> str | None:
    """The first part of ``value``, read from JSON, that is not of the type ``hint`` gives (as
    :data:`REPORT_FIELDS` writes types, or a field's annotation), ``where`` naming the whole:
    its path, its value and the type; None where every part is of its type."""
    if dataclasses.is_dataclass(hint):
        hints = typing.get_type_hints(hint)
        hint = {field.name: hints[field.name] for field in dataclasses.fields(hint)}
    if isinstance(hint, dict):
        if not isinstance(value, dict):
            return _wrong(value, "an object", where)
        return _first_mistyped(
            [
                (value[name], field, f"{where}.{name}")
                for name, field in hint.items()
                if name in value
            ]
        )
    origin, arguments = typing.get_origin(hint), typing.get_args(hint)
    if isinstance(hint, list) or origin in (list, tuple):
        if not isinstance(value, list):
            return _wrong(value, "a list", where)
        item = hint[0] if isinstance(hint, list) else arguments[0]
        return _first_mistyped(
            [(element, item, f"{where}[{index}]") for index, element in enumerate(value)]
        )
    if origin in (types.UnionType, typing.Union):
        if any(_mistyped(value, arm, where) is None for arm in arguments):
            return None
        arms = [arm for arm in arguments if arm is not type(None)]
        if value is not None and len(arms) == 1:  # an optional field: what is wrong in it
            return _mistyped(value, arms[0], where)
        return _wrong(value, " or ".join(_named(arm) for arm in arguments), where)
    if origin is dict:
        if not isinstance(value, dict):
            return _wrong(value, "an object", where)
        return _first_mistyped(
            [(item, arguments[1], f"{where}.{name}") for name, item in value.items()]
        )
    if hint is Any:
        return None
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        fits = value in [member.value for member in hint]
    elif hint in (int, float):
        # JSON's numbers: a float field may hold an integer; true and false are no number.
        fits = isinstance(value, (int, hint)) and not isinstance(value, bool)
    else:
        fits = isinstance(value, hint)
    return None if fits else _wrong(value, _named(hint), where)


def _first_mistyped(parts: list[tuple[Any, Any, str]]) -> str | None:
    return next((wrong for part in parts if (wrong := _mistyped(*part)) is not None), None)


def _named(hint: Any) -> str:
    if hint is type(None):
        return "null"
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return f"a known {hint.__name__}"
    return {str: "a string", int: "an integer", float: "a number", bool: "true or false"}.get(
        hint, getattr(hint, "__name__", str(hint))
    )


def _wrong(value: Any, expected: str, where: str) -> str:
    return f"{where} is {_shown(value)}, not {expected}"


def _shown(value: Any) -> str:
    """A value read from a report, as a line shows it: its representation (control characters
    escaped), cut at 40 characters."""
    shown = repr(value)
    return shown if len(shown) <= 40 else shown[:37] + "..."


@dataclass(frozen=True)
class Merged:
    record: RunRecord
    lines: list[str]
    """What the merge noticed: cases kept once, shards that collected differently."""


def merge_reports(reports: Sequence[ShardReport], gate: Gate | None = None) -> Merged:
    """The union of the shards' runs; :class:`MergeError` when they do not add up to one run.
    With the run's ``gate``, the failures its baseline expects are excused, as a single run
    excuses them as each test ends (a shard run without that baseline counted them)."""
    if not reports:
        raise MergeError("no report to merge")
    first = reports[0]
    for report in reports[1:]:
        if report.plugin_version != first.plugin_version:
            raise MergeError(
                f"{report.path}: written by pytest-torchcompile {report.plugin_version}, "
                f"{first.path} by {first.plugin_version}: rerun the shards with one version"
            )
    _check_split(reports)
    _check_baseline(reports, gate)
    lines = []
    results: list[CaseResult] = []
    owner: dict[str, ShardReport] = {}
    for report in reports:
        for test_id, status in report.statuses.items():
            earlier = owner.get(test_id)
            if earlier is None:
                owner[test_id] = report
            elif earlier.statuses[test_id] != status:
                raise MergeError(
                    f"{test_id} is {earlier.statuses[test_id]} in {earlier.path} but {status} "
                    f"in {report.path}: the shards disagree"
                )
            else:
                lines.append(
                    f"{test_id} ran in {earlier.path} and {report.path}, {status} in both: counted once"
                )
        results.extend(result for result in report.results if owner[result.nodeid] is report)
    collected = [report.record.collected_ids for report in reports]
    if any(ids != collected[0] for ids in collected[1:]):
        differ = set().union(*collected) - set(collected[0]).intersection(*collected[1:])
        lines.append(
            f"WARNING the shards collected different tests ({len(differ)} test ids collected by some "
            "only): were they run from one commit with one command?"
        )
    failed = list(
        dict.fromkeys(failure for report in reports for failure in report.record.failed_reports)
    )
    by_check = set().union(*(report.record.failed_by_check for report in reports))
    if gate is not None:
        failed = _not_excused(failed, results, gate, by_check)
    record = RunRecord(
        results,
        set().union(*collected),
        set().union(*(report.record.selected_ids for report in reports)),
        set().union(*(report.record.narrowed_files for report in reports)),
        failed,
        None,
        _merged_exitstatus(reports, failed),
        None if gate is None else file_digest(gate.path),
        by_check,
    )
    return Merged(record, lines)


def _check_split(reports: Sequence[ShardReport]) -> None:
    """The shards are of one split, and each shard of it has a report."""
    shards = [
        (report, report.record.shard) for report in reports if report.record.shard is not None
    ]
    if not shards:
        return
    first_report, first = shards[0]
    for report, shard in shards[1:]:
        if (shard.splitter, shard.count) != (first.splitter, first.count):
            raise MergeError(
                f"{report.path} is {shard.describe()} but {first_report.path} is {first.describe()}: "
                "not shards of one split"
            )
    present = {shard.index for _, shard in shards}
    missing = [
        index for index in range(first.first, first.first + first.count) if index not in present
    ]
    if missing:
        absent = Shard(first.splitter, missing[0], first.count)
        raise MergeError(
            f"no report of {absent.describe()}"
            + (f" (nor of {len(missing) - 1} more)" if len(missing) > 1 else "")
            + ": every shard's report is needed"
        )


def _check_baseline(reports: Sequence[ShardReport], gate: Gate | None) -> None:
    """The shards were judged against one baseline, the one the merge is given: the failures
    a shard's baseline excused cannot be told apart from passing tests afterwards."""
    first = reports[0]
    digest = first.record.baseline_digest
    for report in reports[1:]:
        if report.record.baseline_digest != digest:
            raise MergeError(
                f"{report.path} was judged against another baseline than {first.path} "
                "(or one and none): rerun the shards with one baseline file"
            )
    if digest is None:
        return
    if gate is None:
        raise MergeError(
            "the shards were judged against a baseline file: give it with --baseline FILE"
        )
    if file_digest(gate.path) != digest:
        raise MergeError(f"{gate.path} is not the baseline file the shards were judged against")


def _merged_exitstatus(
    reports: Sequence[ShardReport], failed: Sequence[tuple[str, str]]
) -> int | None:
    """pytest's exit status of the run the shards make up, before the baseline's say."""
    statuses = [report.record.exitstatus for report in reports]
    unusual = [status for status in statuses if status is not None and status not in _ORDINARY_EXIT]
    if unusual:
        return unusual[0]
    if failed:
        return pytest.ExitCode.TESTS_FAILED
    if statuses and all(status == pytest.ExitCode.NO_TESTS_COLLECTED for status in statuses):
        return pytest.ExitCode.NO_TESTS_COLLECTED
    return pytest.ExitCode.OK


def _not_excused(
    failed: Sequence[tuple[str, str]],
    results: Sequence[CaseResult],
    gate: Gate,
    by_check: Collection[str],
) -> list[tuple[str, str]]:
    """The failed reports that ``gate`` does not excuse: each but the call of a test its check
    failed (``by_check``) where the baseline expects that failure."""
    by_test: dict[str, list[CaseResult]] = {}
    for result in results:
        by_test.setdefault(result.nodeid, []).append(result)
    return [
        (test_id, when)
        for test_id, when in failed
        if when != "call"
        or test_id not in by_check
        or gate.xfail_reason(test_id, by_test.get(test_id, [])) is None
    ]


def relocate_repros(record: RunRecord, into: Path) -> RunRecord:
    """The record with the paths of its checks' repro files (repro, minified, kernel, bug report)
    in the merged repro directory ``into`` where their case was merged there, rather than on the
    shard's machine."""

    def moved(path: str | None, case_id: str) -> str | None:
        parts = Path(path).parts if path else ()
        if case_id not in parts:
            return path
        index = len(parts) - 1 - parts[::-1].index(case_id)
        return str(into.joinpath(*parts[index:]))

    results = []
    for result in record.results:
        case_id = result.case_id
        if case_id is None or not (into / case_id).is_dir():
            results.append(result)
            continue
        minify = result.minify and dataclasses.replace(
            result.minify,
            path=moved(result.minify.path, case_id),
            kernel_path=moved(result.minify.kernel_path, case_id),
            bug_report_path=moved(result.minify.bug_report_path, case_id),
        )
        results.append(
            dataclasses.replace(result, repro_path=moved(result.repro_path, case_id), minify=minify)
        )
    return dataclasses.replace(record, results=results)


def merge_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``merge`` verb's arguments (the command line is ``cli.py``'s)."""
    parser.add_argument("reports", nargs="+", type=Path, metavar="REPORT")
    parser.add_argument(
        "--baseline",
        type=Path,
        default=None,
        metavar="FILE",
        help="the baseline the shards ran with",
    )
    parser.add_argument(
        "--update-baseline",
        action="store_true",
        help="write the baseline file from the union's statuses",
    )
    parser.add_argument("--strict", action="store_true", help="as --compile-accuracy-strict")
    parser.add_argument(
        "--junit", type=Path, default=None, metavar="OUT", help="write a JUnit XML file"
    )
    parser.add_argument(
        "--github-summary",
        default=None,
        metavar="OUT",
        help='append a GitHub step summary to this file (e.g. "$GITHUB_STEP_SUMMARY")',
    )
    parser.add_argument(
        "--report", type=Path, default=None, metavar="OUT", help="write the merged JSON report"
    )
    parser.add_argument(
        "--html", type=Path, default=None, metavar="OUT", help="write the merged HTML report"
    )
    parser.add_argument(
        "--repros",
        nargs="+",
        type=Path,
        default=[],
        metavar="DIR",
        help="the shards' repro directories (--compile-accuracy-dir), to merge --into one",
    )
    parser.add_argument(
        "--into",
        type=Path,
        default=None,
        metavar="DIR",
        help="a new (or empty) directory for the merged repros",
    )


INI_FILES = ("pytest.ini", ".pytest.ini", "pyproject.toml", "tox.ini", "setup.cfg")
"""The files pytest reads its ini settings from, in the directory the merge runs in (the
suite's root, as the tests' ids are relative to it)."""


def merge_usage_error(args: argparse.Namespace) -> str | None:
    """Why the ``merge`` arguments cannot be used together, or None."""
    if args.update_baseline and args.baseline is None:
        return "--update-baseline needs --baseline FILE"
    if bool(args.repros) != (args.into is not None):
        return "--repros DIR... and --into DIR go together"
    return clashing_paths(
        [
            *(("REPORT", path) for path in args.reports),
            ("--baseline", args.baseline),
            *(("--repros", path) for path in args.repros),
            *((INI_FILE, Path(name)) for name in INI_FILES),
        ],
        _merge_outputs(args),
    )


def _merge_outputs(args: argparse.Namespace) -> list[tuple[str, str | Path | None]]:
    return [
        ("--report", args.report),
        ("--html", args.html),
        ("--junit", args.junit),
        ("--github-summary", args.github_summary),
        ("--into", args.into),
        ("--baseline", args.baseline if args.update_baseline else None),
    ]


def merge(args: argparse.Namespace) -> int:
    """The ``merge`` verb: print what the union's run found and return its exit status."""
    try:
        reports = [load_report(path) for path in args.reports]
        tests = test_inputs(Path.cwd(), {i for r in reports for i in r.record.collected_ids})
        clash = clashing_paths(tests, _merge_outputs(args))
        if clash is not None:
            raise MergeError(clash)
        gate = (
            None
            if args.baseline is None
            else Gate.load(args.baseline, args.strict, args.update_baseline)
        )
        merged = merge_reports(reports, gate)
        lines = [*_shard_lines(reports), *merged.lines]
        if args.repros:
            lines.extend(merge_repro_dirs(args.repros, args.into))
    except (MergeError, BaselineError, ReproDirError, OSError) as error:
        print(f"merge refused: {error}", file=sys.stderr)
        return REFUSED
    record = merged.record if args.into is None else relocate_repros(merged.record, args.into)
    files = report_files(args.report, args.html, args.github_summary, args.junit, gate)
    layout = TerminalLayout(shutil.get_terminal_size().columns, root=Path.cwd())
    end = conclude_run(record, gate, writing(files), lambda: reports[0].environment, layout)
    _print(lines + end.lines, end)
    status = pytest.ExitCode.OK if record.exitstatus is None else record.exitstatus
    return int(end.exit_status(status, len(record.failed_reports)))


def _shard_lines(reports: Sequence[ShardReport]) -> list[str]:
    lines = [f"merged {len(reports)} reports: {', '.join(_describe(report) for report in reports)}"]
    lines.extend(note for report in reports for note in report.notes)
    lines.extend(
        f"WARNING {report.path}: its run ended with exit status {report.record.exitstatus}"
        for report in reports
        if report.record.exitstatus not in (None, *_ORDINARY_EXIT)
    )
    if any(report.environment != reports[0].environment for report in reports[1:]):
        lines.append(
            "WARNING the shards ran in different environments (versions, devices or Inductor "
            "config): their checks may not compare"
        )
    return lines


def _describe(report: ShardReport) -> str:
    shard = report.record.shard
    return f"{report.path} ({shard.describe() if shard else 'whole suite'}, {len(report.statuses)} tests checked)"


def _print(lines: Sequence[str], end: RunEnd) -> None:
    for line in lines:
        print(line)
    if end.failures:
        print("compile accuracy: the run fails against the baseline:")
        for line in end.failure_lines:
            print(line)
