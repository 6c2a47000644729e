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
import shutil
import sys
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

from pytest_torchcompile.common.files import (
    clashing_paths,
)
from pytest_torchcompile.common.results import CaseResult
from pytest_torchcompile.reporting.baseline import Gate
from pytest_torchcompile.reporting.baseline_file import BaselineError
from pytest_torchcompile.reporting.layout import TerminalLayout
from pytest_torchcompile.run.conclusion import RunEnd, RunRecord, conclude_run, file_digest
from pytest_torchcompile.run.merge_repros import ReproDirError, merge_repro_dirs
from pytest_torchcompile.run.report_files import report_files, writing
from pytest_torchcompile.run.session import INI_FILE, test_inputs
from pytest_torchcompile.run.shard import Shard
from pytest_torchcompile.run.shard_report import MergeError, ShardReport, load_report

REFUSED = 4
"""The merge's exit status when it refuses its input (pytest's for a usage error)."""

# pytest's exit statuses a shard may end with that say nothing beyond its tests' reports.
_ORDINARY_EXIT = (
    pytest.ExitCode.OK,
    pytest.ExitCode.TESTS_FAILED,
    pytest.ExitCode.NO_TESTS_COLLECTED,
)


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
    _check_versions(reports)
    _check_split(reports)
    _check_baseline(reports, gate)
    results, lines = _union_of_checks(reports)
    collected = [report.record.collected_ids for report in reports]
    lines.extend(_collection_lines(collected))
    failed, by_check = _failures(reports, results, gate)
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


def _failures(
    reports: Sequence[ShardReport], results: Sequence[CaseResult], gate: Gate | None
) -> tuple[list[tuple[str, str]], set[str]]:
    """The shards' failed reports, each once, those the baseline excuses left out; and the tests
    whose call a check failed."""
    failed = list(
        dict.fromkeys(failure for report in reports for failure in report.record.failed_reports)
    )
    by_check = set().union(*(report.record.failed_by_check for report in reports))
    if gate is not None:
        failed = _not_excused(failed, results, gate, by_check)
    return failed, by_check


def _check_versions(reports: Sequence[ShardReport]) -> None:
    """The shards ran one version of the plugin."""
    first = reports[0]
    for report in reports[1:]:
        if report.plugin_version != first.plugin_version:
            raise MergeError(
                f"{report.path}: written by pytest-torchcompile {report.plugin_version}, "
                f"{first.path} by {first.plugin_version}: rerun the shards with one version"
            )


def _union_of_checks(reports: Sequence[ShardReport]) -> tuple[list[CaseResult], list[str]]:
    """Every test's checks, from the first report that ran it; a line for each test that ran in
    two reports alike (:class:`MergeError` where they disagree)."""
    lines = []
    results: list[CaseResult] = []
    owner: dict[str, ShardReport] = {}
    for report in reports:
        for test_id, status in report.statuses.items():
            earlier = owner.setdefault(test_id, report)
            if earlier is report:
                continue
            if earlier.statuses[test_id] != status:
                raise MergeError(
                    f"{test_id} is {earlier.statuses[test_id]} in {earlier.path} but {status} "
                    f"in {report.path}: the shards disagree"
                )
            lines.append(
                f"{test_id} ran in {earlier.path} and {report.path}, {status} in both: counted once"
            )
        results.extend(result for result in report.results if owner[result.nodeid] is report)
    return results, lines


def _collection_lines(collected: Sequence[Collection[str]]) -> list[str]:
    """A warning where the shards collected different tests."""
    if all(ids == collected[0] for ids in collected[1:]):
        return []
    differ = set().union(*collected) - set(collected[0]).intersection(*collected[1:])
    return [
        f"WARNING the shards collected different tests ({len(differ)} test ids collected by some "
        "only): were they run from one commit with one command?"
    ]


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
    _check_every_shard(first, {shard.index for _, shard in shards})


def _check_every_shard(split: Shard, present: Collection[int]) -> None:
    """Each shard of ``split`` has a report (its index is ``present``)."""
    missing = [
        index for index in range(split.first, split.first + split.count) if index not in present
    ]
    if missing:
        absent = Shard(split.splitter, missing[0], split.count)
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
        reports, gate, merged, lines = _merged(args)
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


def _merged(
    args: argparse.Namespace,
) -> tuple[list[ShardReport], Gate | None, Merged, list[str]]:
    """The shards' reports read, the baseline loaded, their union and the lines the merge
    says of them, the repro directories merged; an error where the merge refuses its input."""
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
    return reports, gate, merged, lines


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
