"""What one pytest process knows about compile accuracy: settings, results, repros to minify."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import threading
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from pytest_torchcompile.common.allowed import CompilerNames, ConfigHas, ConfigRefusal
from pytest_torchcompile.common.files import clashing_paths, refusal
from pytest_torchcompile.common.results import CaseResult, MinifyResult
from pytest_torchcompile.common.run_state import Checker, MinifyJob
from pytest_torchcompile.common.settings import (
    FIXTURE,
    CheckSettings,
    GatingSettings,
    marker_settings,
)
from pytest_torchcompile.common.verdict import CheckFailed, leaves_device_unusable
from pytest_torchcompile.reporting.baseline import Gate
from pytest_torchcompile.reporting.baseline_file import BaselineError
from pytest_torchcompile.reporting.cells import printable
from pytest_torchcompile.reporting.junit import junit_properties
from pytest_torchcompile.reporting.layout import TerminalLayout
from pytest_torchcompile.reporting.terminal import minified_section
from pytest_torchcompile.run.conclusion import (
    RunEnd,
    RunRecord,
    WriteReports,
    conclude_run,
    file_digest,
)
from pytest_torchcompile.run.report_files import ReportFile, report_files, writing
from pytest_torchcompile.run.repro_tests import recorded_kind, repro_test_result
from pytest_torchcompile.run.shard import Shard


@dataclass
class AccuracySession:
    enabled: bool
    repro_root: Path
    base_settings: CheckSettings
    describe_environment: Callable[[], dict[str, Any]]
    """Versions, devices and the non-default Inductor config, for the JSON report; given by the
    caller, since finding them needs torch, which this module does not import."""
    runner: Checker | None = None
    """Checks the tests this process runs; None where nothing is checked (``--compile-accuracy``
    off, an xdist controller), so that such a process never imports torch for the plugin."""
    gating: GatingSettings | None = None
    gate: Gate | None = None
    """The baseline in use; every process loads it (workers judge the tests they run)."""
    shard: Shard | None = None
    """The part of a suite split over machines this run is; None for the whole suite."""
    baseline_digest: str | None = None
    """The baseline file's sha256 as the run started; None without one (or before it is written)."""
    compiler_names: CompilerNames | None = None
    """The backends and modes the installed torch takes, asked of a marker's or the fixture's
    ``backend`` and ``mode``; given by the caller where tests are checked (it imports torch)."""
    config_has: ConfigHas | None = None
    """Whether the installed torch's Inductor config has a name, asked of each name of a marker's
    or the fixture's ``inductor_config``; given where tests are checked, as ``compiler_names``."""
    config_refusal: ConfigRefusal | None = None
    """What the installed torch's Inductor config takes for a name, asked of each value of a
    marker's or the fixture's ``inductor_config``; given where tests are checked, as
    ``compiler_names``."""
    _results: list[CaseResult] = field(default_factory=list, init=False, repr=False)
    _minify_jobs: list[MinifyJob] = field(default_factory=list, init=False, repr=False)
    """Cases found in this process and not yet handed to the minify phase's queue."""
    _collected_ids: set[str] = field(default_factory=set, init=False, repr=False)
    _selected_ids: set[str] = field(default_factory=set, init=False, repr=False)
    _features_off: list[str] = field(default_factory=list, init=False, repr=False)
    _unreported: int = field(default=0, init=False, repr=False)
    """``results[_unreported:]`` were made in this process and not yet put on a test report."""
    _test_results: dict[str, list[CaseResult]] = field(default_factory=dict, init=False, repr=False)
    _run_end: RunEnd | None = field(default=None, init=False, repr=False)
    _failed_reports: list[tuple[str, str]] = field(default_factory=list, init=False, repr=False)
    """(test id, phase) of every failed test report received, as pytest counts them."""
    _failed_by_check: set[str] = field(default_factory=set, init=False, repr=False)
    """The tests among them whose call a check failed (:meth:`annotate_report`)."""
    _environment: dict[str, Any] | None = field(default=None, init=False, repr=False)
    on_minify_job: Callable[[MinifyJob], None] | None = None
    """Told of each case queued for minification as soon as its repro is written."""
    devices_lost_in: str | None = None
    """The test whose compiled code hit a device-side error, after which no kernel can run on
    its device in this process (CUDA keeps the error for the rest of the process's life)."""
    token: str = field(default_factory=lambda: uuid.uuid4().hex)
    """Names this session in the case directories it claims (``repro.unique_case_dir``)."""
    _sigterm_handler: Any = field(default=None, init=False, repr=False)
    """SIGTERM's handler before :meth:`stop_on_sigterm` replaced it; None where it did not."""
    _outputs: list[tuple[str, str | os.PathLike[str] | None]] = field(
        default_factory=list, init=False, repr=False
    )
    """The files the run writes, by the setting that names them (see :meth:`configure_gating`)."""
    _refused: bool = field(default=False, init=False, repr=False)
    """Whether the run stopped for an output at one of its inputs: it then writes nothing."""
    report_files: list[ReportFile] = field(default_factory=list, init=False, repr=False)
    """The files the run's end writes (:meth:`configure_gating`), registered as plugins on the
    controller (or the only process)."""

    def stop_on_sigterm(self) -> None:
        """Have SIGTERM (what a CI job's timeout sends) stop the run as Ctrl-C does, as a
        ``KeyboardInterrupt``: the summary, the reports, the queue and the judging children are
        then ended as after Ctrl-C, where SIGTERM's default would end the process on the spot.
        Only from the main thread (Python's rule), and only over the default handler: one set
        by the user or another plugin is theirs. :meth:`close` puts it back."""
        if (
            threading.current_thread() is threading.main_thread()
            and signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
        ):
            self._sigterm_handler = signal.signal(signal.SIGTERM, signal.default_int_handler)

    def settings_for(self, item: pytest.Item, overrides: dict[str, Any]) -> CheckSettings:
        """The settings of a check in test ``item``: the run's, its marker's over them,
        ``overrides`` (the fixture's keywords) over both; a usage error for a keyword given a
        value it does not take."""
        names, has, refusal = self.compiler_names, self.config_has, self.config_refusal
        marker = item.get_closest_marker("inductor_repro")
        repro_test = recorded_kind(item) is not None
        return marker_settings(self.base_settings, marker, names, has, repro_test, refusal).replace(
            overrides, FIXTURE, names, has, refusal
        )

    def check(
        self,
        nodeid: str,
        fn: Callable[..., Any],
        args: Sequence[Any],
        kwargs: dict[str, Any],
        settings: CheckSettings,
        record_property: Callable[[str, object], None] | None = None,
        supersede: bool = False,
    ) -> Any:
        """The fixture's work: run ``fn`` as it is when checking is off, else check it (see
        :meth:`Checker.check`)."""
        if self.runner is None:
            return fn(*args, **kwargs)
        return self.runner.check(nodeid, fn, args, kwargs, settings, record_property, supersede)

    def running_test(
        self, nodeid: str, settings: CheckSettings, watch: bool
    ) -> AbstractContextManager[None]:
        """Around one test's call (see :meth:`Checker.running_test`)."""
        if self.runner is None:
            return contextlib.nullcontext()
        return self.runner.running_test(nodeid, settings, watch)

    def close(self) -> None:
        """End what this process started for its checks (from ``pytest_unconfigure``), and give
        SIGTERM its handler back."""
        if self._sigterm_handler is not None:
            signal.signal(signal.SIGTERM, self._sigterm_handler)
            self._sigterm_handler = None
        if self.runner is not None:
            self.runner.close()

    @property
    def environment(self) -> dict[str, Any] | None:
        """The report's environment, described at the first ask, after the tests (an xdist
        worker's, as its session finishes); None where no report is written. Not before them:
        describing it imports the compiler, whose modules warn as they are first imported, and
        those warnings are the tests' to see, as in a run without the plugin."""
        if (
            self._environment is None
            and self.gating is not None
            and (self.gating.report is not None or self.gating.html is not None)
        ):
            self._environment = self.describe_environment()
        return self._environment

    def note_environment(self, environment: Mapping[str, Any] | None) -> None:
        """Take a worker's environment for the report (the first one sent): an xdist controller
        would otherwise import torch and its compiler only to describe it, seconds at the end of
        every run."""
        if environment and self._environment is None:
            self._environment = dict(environment)

    def note_features_off(self, lines: Sequence[str] = ()) -> None:
        """Add ``lines`` (a worker's) to :attr:`features_off`, or without any, this process's
        checker's; each line once."""
        for line in lines or (self.runner.features_off() if self.runner is not None else []):
            if line not in self._features_off:
                self._features_off.append(line)

    @property
    def results(self) -> tuple[CaseResult, ...]:
        """Every check recorded in this process and, on the controller, received from workers."""
        return tuple(self._results)

    def record(self, *results: CaseResult) -> None:
        """Record checks this process made (put on its test's report as the test ends)."""
        self._results.extend(results)

    @property
    def collected_ids(self) -> frozenset[str]:
        """Every test id collected (deselected ones included); under xdist, sent by the workers."""
        return frozenset(self._collected_ids)

    @property
    def selected_ids(self) -> frozenset[str]:
        """The collected test ids left to run (not deselected); under xdist, sent by the workers."""
        return frozenset(self._selected_ids)

    def note_collected(self, ids: Iterable[str]) -> None:
        """Add test ids collected."""
        self._collected_ids.update(ids)

    def note_selected(self, ids: Iterable[str]) -> None:
        """Add test ids left to run once deselection is done."""
        self._selected_ids.update(ids)

    @property
    def features_off(self) -> list[str]:
        """A line per feature the installed torch leaves off, naming the torch internal it lacks;
        under xdist, sent by the workers."""
        return list(self._features_off)

    def queue_minify_job(self, job: MinifyJob) -> None:
        self._minify_jobs.append(job)
        if self.on_minify_job is not None:
            self.on_minify_job(job)

    def take_minify_jobs(self) -> list[MinifyJob]:
        """The cases found since the last take, handed over to the minify phase."""
        jobs, self._minify_jobs[:] = list(self._minify_jobs), []
        return jobs

    def drop_unreported_checks(self, nodeid: str) -> None:
        """Forget the checks ``nodeid`` made since its last report, with their repros."""
        earlier = [r for r in self._results[self._unreported :] if r.nodeid == nodeid]
        for result in earlier:
            self._results.remove(result)
            if result.case_id is not None:
                self._drop_minify_jobs({result.case_id})
                shutil.rmtree(self.repro_root / result.case_id, ignore_errors=True)
                (self.repro_root / f"{result.case_id}.claimed").unlink(missing_ok=True)

    def _drop_minify_jobs(self, case_ids: set[str | None]) -> None:
        """Forget the minify jobs of these cases; their test has not finished, so none is queued."""
        self._minify_jobs[:] = [job for job in self._minify_jobs if job.case_id not in case_ids]

    def record_minified(self, case_id: str, result: MinifyResult) -> None:
        for case in self._results:
            if case.case_id == case_id:
                case.minify = result

    def name_minified_in_failures(
        self, reports: Sequence[pytest.TestReport], layout: TerminalLayout
    ) -> None:
        """After the minify phase, before failures are printed: each failed test's report gains
        what minifying its checks found (minified repro, stage)."""
        minified: dict[str, list[CaseResult]] = {}
        for case in self._results:
            if case.minify is not None:
                minified.setdefault(case.nodeid, []).append(case)
        for report in reports:
            if report.when == "call" and report.nodeid in minified:
                report.sections.append(
                    (
                        "compile accuracy: minified",
                        minified_section(minified[report.nodeid], layout),
                    )
                )

    # --- gating and reports: results travel on test reports, so that xdist workers and a plain
    # run take one path; everything is decided and written once, on the controller.

    def configure_gating(
        self,
        gating: GatingSettings,
        junit: Path | None = None,
        inputs: Sequence[tuple[str, str | os.PathLike[str] | None]] = (),
    ) -> None:
        """Load the baseline; a file that cannot be used, a report or baseline path that cannot
        be written, or one path named for two files (an output that is an input, two outputs:
        the JSON report, pytest's ``junit``, the baseline, the repro directory, the GitHub step
        summary) stops the run before any test runs. ``inputs``: the other files the run reads
        that are known before collection (the ini file, conftest.py files, test files named on
        the command line); :meth:`refuse_outputs_at` checks those collection finds."""
        self.gating = gating
        self._outputs = [
            ("--compile-accuracy-report", gating.report),
            ("--compile-accuracy-html", gating.html),
            ("--junitxml", junit),
            (BASELINE_OPTION, gating.baseline if gating.update_baseline else None),
            ("--compile-accuracy-dir", self.repro_root if self.enabled else None),
            ("$GITHUB_STEP_SUMMARY", _github_summary()),
        ]
        self.refuse_outputs_at([(BASELINE_OPTION, gating.baseline), *inputs])
        written = [("JSON report", gating.report), ("HTML report", gating.html)]
        if gating.update_baseline:
            written.append(("baseline", gating.baseline))
        for what, path in written:
            refused = None if path is None else refusal(path)
            if refused is not None:
                raise pytest.UsageError(
                    f"compile accuracy: cannot write the {what} {path}: {refused}"
                )
        if gating.baseline is not None:
            try:
                self.gate = Gate.load(gating.baseline, gating.strict, gating.update_baseline)
            except BaselineError as error:
                raise pytest.UsageError(f"compile accuracy baseline: {error}") from None
            self.baseline_digest = file_digest(gating.baseline)
        self.report_files = report_files(
            gating.report, gating.html, _github_summary(), gate=self.gate
        )

    def refuse_outputs_at(
        self, inputs: Sequence[tuple[str, str | os.PathLike[str] | None]]
    ) -> None:
        """Stop the run with a usage error, in one line naming both settings and the path, where
        an output (or two) is at one of ``inputs``; the run then writes none of its files."""
        clash = clashing_paths(inputs, self._outputs)
        if clash is not None:
            self._refused = True
            raise pytest.UsageError(f"compile accuracy: {clash}")

    def refuse_outputs_at_tests(self, root: Path, test_ids: Iterable[str]) -> None:
        """:meth:`refuse_outputs_at` the files of the tests collected (:func:`test_inputs`)."""
        if any(path is not None for _, path in self._outputs):
            self.refuse_outputs_at(test_inputs(root, test_ids))

    def annotate_report(
        self,
        item: pytest.Item,
        report: pytest.TestReport,
        raised: pytest.ExceptionInfo[BaseException] | None,
    ) -> None:
        """Where the test ran, as its report is made: move the checks made since the last report
        onto the report (for the controller), and at the end of the call phase judge the test
        against the baseline: a failure its check raised (``raised``, the call's exception, is
        :class:`CheckFailed`, or a repro test failed with its verdict) becomes xfail with its
        repro path where the baseline records it (or the row is flaky); a new failure names the
        baseline. A test's own failure stands, whatever its row says, as in a plain run."""
        pending = self._results[self._unreported :]
        del self._results[self._unreported :]
        mine = self._test_results.setdefault(item.nodeid, [])
        mine.extend(result for result in pending if result.nodeid == item.nodeid)
        if report.when == "call":
            self._judge_call(item, report, raised, pending, mine)
        elif report.when == "teardown":
            self._test_results.pop(item.nodeid, None)
        if report.failed and self.devices_lost_in not in (None, item.nodeid):
            self._note_lost_device(item, report)
        if pending:
            setattr(report, RESULTS_ATTRIBUTE, json.dumps([result.to_dict() for result in pending]))

    def _judge_call(
        self,
        item: pytest.Item,
        report: pytest.TestReport,
        raised: pytest.ExceptionInfo[BaseException] | None,
        pending: list[CaseResult],
        mine: list[CaseResult],
    ) -> None:
        """The call's report: a repro test's own check added (to ``pending``, the checks it
        carries, and ``mine``, the test's), the checks' JUnit properties, whether a check failed
        the test, and its failure against the baseline."""
        made = None if mine else repro_test_result(item, report)
        if made is not None:
            pending.append(made)
            mine.append(made)
        public = TerminalLayout.of(item.config).public
        for result in pending:
            if result.graphs_judged is not None or result is made:
                # The fixture records its own checks' properties as it makes them.
                item.user_properties.extend(junit_properties(result, public))
        by_check = report.failed and (
            made is not None or (raised is not None and raised.errisinstance(CheckFailed))
        )
        if by_check:
            setattr(report, FAILED_BY_CHECK_ATTRIBUTE, True)
        if self.gate is not None and mine and report.failed:
            self._gate_failure(self.gate, item, report, mine, by_check)

    def _note_lost_device(self, item: pytest.Item, report: pytest.TestReport) -> None:
        """A section on a failed report that follows from an earlier test's device-side error."""
        if not _device_unusable(report):
            return
        report.sections.append(
            (
                "compile accuracy",
                _fitted(
                    item.config,
                    f"the device-side error in {self.devices_lost_in} left the device unusable to this "
                    "process, which this failure follows from; run this test on its own",
                ),
            )
        )

    def _gate_failure(
        self,
        gate: Gate,
        item: pytest.Item,
        report: pytest.TestReport,
        mine: Sequence[CaseResult],
        by_check: bool,
    ) -> None:
        """A failed call against the baseline: xfail where its check failed it and the baseline
        expects that failure; else a section naming the baseline's word on it."""
        reason = gate.xfail_reason(item.nodeid, mine)
        if reason is not None and by_check:
            report.outcome = "skipped"
            report.wasxfail = printable(TerminalLayout.of(item.config).public(reason))
            if self.gating is not None and not self.gating.minify_expected:
                self._drop_minify_jobs({result.case_id for result in mine})
            return
        note = (
            f"not excused: the test failed with its own error, as in a plain run; {reason}"
            if reason is not None
            else gate.failure_note(item.nodeid, mine)
        )
        if note is not None:
            report.sections.append(("compile accuracy baseline", _fitted(item.config, note)))

    def receive_report(self, report: pytest.TestReport) -> None:
        """On the controller (or the only process): take the checks a report carries."""
        data = getattr(report, RESULTS_ATTRIBUTE, None)
        if data:
            self._results.extend(CaseResult.from_dict(item) for item in json.loads(data))
        self._unreported = len(self._results)
        if report.failed and not hasattr(report, "wasxfail"):
            self._failed_reports.append((report.nodeid, report.when))
            if getattr(report, FAILED_BY_CHECK_ATTRIBUTE, False):
                self._failed_by_check.add(report.nodeid)

    def end_run(
        self,
        narrowed_files: set[str],
        layout: TerminalLayout | None = None,
        exitstatus: int | None = None,
        write_reports: WriteReports | None = None,
    ) -> RunEnd:
        """On the controller, once, after the minify phase: judge the run against the baseline
        and have its report files written (see :func:`conclude_run`): by ``write_reports``
        (pytest's hook, where they are registered), else each of :attr:`report_files` in turn.
        ``exitstatus`` is pytest's, for the report. Later calls return the first answer."""
        if self._run_end is not None:
            return self._run_end
        if self._refused:  # the run stopped for an output at an input: nothing is written
            self._run_end = RunEnd([], [])
            return self._run_end
        record = RunRecord(
            self._results,
            self._collected_ids,
            self._selected_ids,
            narrowed_files,
            self._failed_reports,
            self.shard,
            exitstatus,
            self.baseline_digest,
            self._failed_by_check,
        )
        self._run_end = conclude_run(
            record,
            self.gate,
            write_reports or writing(self.report_files),
            lambda: self._environment or self.describe_environment(),
            layout,
            self.enabled,
            self._features_off,
        )
        return self._run_end


SESSION_KEY = pytest.StashKey[AccuracySession]()
"""Where a pytest config keeps its run's session (the plugin's hooks and the fixture read it)."""
CURRENT_ITEM_KEY = pytest.StashKey[pytest.Item]()
"""The test running now, for the fixture's check to act for."""


FAILED_BY_CHECK_ATTRIBUTE = "torchcompile_failed_by_check"
"""Set (True) on the report of a test call that a check failed, for the controller: xdist carries
report attributes from workers to it."""

RESULTS_ATTRIBUTE = "torchcompile_results"
"""Test report attribute with the checks made since the previous report, as a JSON list of
``CaseResult.to_dict()``; xdist carries report attributes from workers to the controller."""


BASELINE_OPTION = "--compile-accuracy-baseline"


def _github_summary() -> str | None:
    """The file a GitHub Actions step appends its summary to, where there is one."""
    return os.environ.get("GITHUB_STEP_SUMMARY") or None


def _fitted(config: pytest.Config, text: str) -> str:
    """``text`` for a test's report: paths under the rootdir relative to it, wrapped to the terminal."""
    layout = TerminalLayout.of(config)
    return layout.fit(layout.shown(text))


def _device_unusable(report: pytest.TestReport) -> bool:
    return leaves_device_unusable(report.longreprtext)


TEST_FILE, CONFTEST, INI_FILE = "a test file", "a conftest.py", "the ini file"
"""The inputs of a run that no output may be at, as a refusal names them."""


def test_inputs(root: Path, test_ids: Iterable[str]) -> list[tuple[str, Path]]:
    """The files the tests ``test_ids`` are read from: their test files (named relative to
    ``root``, as node ids name them) and the conftest.py files beside them and in every directory
    above, up to ``root``."""
    files = {Path(root, test_id.split("::", 1)[0]) for test_id in test_ids}
    directories: set[Path] = set()
    for file in files:
        directory = file.parent
        while directory not in directories:
            directories.add(directory)
            if directory == root or directory.parent == directory:
                break
            directory = directory.parent
    conftests = [directory / "conftest.py" for directory in sorted(directories)]
    return [(TEST_FILE, file) for file in sorted(files)] + [
        (CONFTEST, conftest) for conftest in conftests if conftest.is_file()
    ]


# Tells pytest that this library function is not a test when a test module imports it.
test_inputs.__test__ = False  # type: ignore[attr-defined]


def narrowed_files(config: pytest.Config) -> set[str]:
    """Test files (as in node ids) whose collection a node id argument narrowed to some tests."""
    files = set()
    for arg in config.args:
        if "::" not in arg:
            continue
        path = Path(config.invocation_params.dir, arg.split("::", 1)[0]).resolve()
        try:
            files.add(path.relative_to(config.rootpath).as_posix())
        except ValueError:
            files.add(Path(os.path.relpath(path, config.rootpath)).as_posix())
    return files
