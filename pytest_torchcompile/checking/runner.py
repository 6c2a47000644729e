"""The checks of the tests this process runs, where ``--compile-accuracy`` is on: the fixture's
model checks and the plain ``torch.compile`` graphs of watched tests, each failing graph written
as a repro and queued for the minify phase. The only part of a session that needs torch."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import pytest
import torch

from pytest_torchcompile.checking.aside import aside
from pytest_torchcompile.checking.compiled import CompiledCache
from pytest_torchcompile.checking.confirmation import Confirmer, settle
from pytest_torchcompile.checking.masked import (
    ProbeChildren,
    current_device,
    device_of,
    graph_device,
)
from pytest_torchcompile.checking.messages import failure_message, graph_failures_message
from pytest_torchcompile.checking.model import check_model
from pytest_torchcompile.checking.outcome import (
    CheckOutcome,
    EagerRunError,
    FailingGraph,
    GraphOutcome,
)
from pytest_torchcompile.checking.plain import GraphChecker
from pytest_torchcompile.checking.runs import model_tensors, unjudgeable_input
from pytest_torchcompile.common.allowed import ConfigValueRefused, refused_config_value
from pytest_torchcompile.common.files import unusable_directory, unwritable_directory
from pytest_torchcompile.common.kinds import FailureKind
from pytest_torchcompile.common.results import CaseResult
from pytest_torchcompile.common.run_state import MinifyJob, RunState
from pytest_torchcompile.common.settings import MARKER, CheckSettings
from pytest_torchcompile.common.verdict import CheckFailed, Comparison, Status
from pytest_torchcompile.judging.capture import GraphCapture
from pytest_torchcompile.judging.case import ReproCase
from pytest_torchcompile.judging.judge import DYNAMO, POST_AOT, error_signature
from pytest_torchcompile.reporting.junit import junit_properties
from pytest_torchcompile.reporting.layout import TerminalLayout
from pytest_torchcompile.repros.loading import repro_defect
from pytest_torchcompile.repros.repro import slugify, write_case
from pytest_torchcompile.torch_internals.availability import core_missing, features_off
from pytest_torchcompile.torch_internals.compiling import (
    compiler_imported,
    quiet_trace_log,
    reset_if_compiled,
)
from pytest_torchcompile.torch_internals.config import inductor_config
from pytest_torchcompile.torch_internals.environment import INDUCTOR_CACHE_VARIABLE, inductor_cache
from pytest_torchcompile.torch_internals.interception import intercept_inductor


def check_inductor_cache() -> None:
    """Raise a usage error where Inductor's cache directory cannot be written: every compile
    would fail on it, each test's check not judged for one cause. Asked before the run makes its
    repro directory, so that a run stopped here writes nothing."""
    cache, named = inductor_cache()
    if named:
        unusable = unusable_directory(cache)
        source = INDUCTOR_CACHE_VARIABLE
    else:  # Inductor's own, made at its first compile: a run that compiles nothing makes none
        unusable = unwritable_directory(cache)
        source = f"Inductor's default; {INDUCTOR_CACHE_VARIABLE} names another"
    if unusable is not None:
        raise pytest.UsageError(
            f"compile accuracy: cannot write in Inductor's cache directory {cache} "
            f"({source}): {unusable}; give a writable one"
        )


class CheckRunner:
    """Runs the checks of this process's tests for ``session``, which gathers their results."""

    def __init__(self, session: RunState, layout: TerminalLayout) -> None:
        self.session = session
        self.layout = layout
        """The terminal's: a failing test's report fits it."""
        self.compiled_cache = CompiledCache()
        """Compiled models of the running test, reused across its checks (hypothesis examples)."""
        self.probe_children = ProbeChildren()
        self.confirmer = Confirmer()
        self.restore_trace_log: Callable[[], None] | None = None
        """Gives torch's trace logger its level back, where the run quieted it."""
        self.plain_compiles = GraphCapture(watching=False)
        """Every Inductor compile of the run's own ``torch.compile`` calls, from its start: Dynamo
        serves code compiled in one test (or a fixture) to later ones, as in a plain run, and a
        watched test's calls of it are judged there (no reset, no recompile)."""
        self._interception = contextlib.ExitStack()

    @classmethod
    def start(
        cls, session: RunState, layout: TerminalLayout, trace_log: bool, probe_child: bool
    ) -> CheckRunner:
        """Ready this process to check, before any test. The compiler is not imported for it: a
        run whose tests compile nothing does not pay its import (seconds), and one that compiles
        pays it where plain ``torch.compile`` would, in the test that first compiles. A probe
        child started now pays Inductor's first compile while the tests are collected."""
        runner = cls(session, layout)
        # Code compiled before the run (in this process, by an earlier run of pytest or at
        # import) went through no capture of this one: compiled anew, it is judged where called.
        reset_if_compiled()
        runner._interception.enter_context(
            intercept_inductor(runner.plain_compiles.hook, runner.plain_compiles.dynamo_hook)
        )
        if not trace_log:
            runner.restore_trace_log = quiet_trace_log()
        if probe_child:
            runner.probe_children.start(current_device())
        return runner

    def close(self) -> None:
        """End what this process started for its checks (from ``pytest_unconfigure``)."""
        self._interception.close()
        self.probe_children.close()
        self.confirmer.close()
        if self.restore_trace_log is not None:
            self.restore_trace_log()

    @functools.cached_property
    def torch_unusable(self) -> str | None:
        """Why the installed torch cannot be checked with (an internal checking needs is gone), as
        a check's message; None where it can. Asked at the first check, which imports the compiler."""
        missing = core_missing()
        if missing is None:
            return None
        return f"torch {torch.__version__} has no {missing}, which checking needs; the model ran eagerly"

    def features_off(self) -> list[str]:
        """A line per feature the installed torch leaves off; none where this process compiled
        nothing (it used none of them, and the compiler is not imported to tell)."""
        if not compiler_imported():
            return []
        return [feature.line for feature in features_off()]

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
        """The fixture's work: check, record, and fail the test with a readable report and a
        repro when the compiler is at fault. The check works on copies, aside (what its runs log
        reaches no log of the test's); the model then runs as the plain fixture runs it, once,
        on the caller's model and inputs and from the caller's random stream, so that what the
        test sees after the call (the return value, weights, buffers, inputs written in place,
        the generators, its logs) is what a plain run leaves. A failing check fails the test
        after that call: its report's captured log holds the plain call's records.

        ``supersede`` (hypothesis tests): each example replaces the test's earlier ones, so the
        run keeps the example hypothesis reports last (the shrunk one) and minifies only that."""
        if supersede:
            self.session.drop_unreported_checks(nodeid)
        unjudged = unjudgeable_input(fn, args, kwargs)
        if unjudged is None and settings.backend == "inductor":
            # Before the compiler's import below, which the child's own import then overlaps.
            self.confirmer.start(_device_checked(fn, args, kwargs))
        unjudged = self.torch_unusable or unjudged
        if unjudged is not None:
            self.session.record(CaseResult(nodeid, Status.NOT_JUDGED, unjudged))
            return fn(*args, **kwargs)
        with aside():
            eager_error, failure = self._check(nodeid, fn, args, kwargs, settings, record_property)
        try:
            result = fn(*args, **kwargs)
        except Exception:
            if eager_error is not None:
                self.session.record(CaseResult(nodeid, Status.EAGER_FAIL, str(eager_error)))
            raise
        if eager_error is not None:
            # The plugin's copies raised, not the model: a deep copy it refuses, say.
            self.session.record(
                CaseResult(
                    nodeid,
                    Status.NOT_JUDGED,
                    f"{eager_error}, where a plain call does not: the model ran plainly",
                )
            )
        if failure is not None:
            raise CheckFailed(failure, pytrace=False)
        return result

    def _check(
        self,
        nodeid: str,
        fn: Callable[..., Any],
        args: Sequence[Any],
        kwargs: dict[str, Any],
        settings: CheckSettings,
        record_property: Callable[[str, object], None] | None,
    ) -> tuple[EagerRunError | None, str | None]:
        """Check and record. Returns the error where the check's eager run raised, which the
        plain run then confirms or not, and the message the test fails with where the compiler
        is at fault."""
        try:
            outcome = check_model(
                fn,
                args,
                kwargs,
                settings.check_options(),
                self.compiled_cache,
                self.probe_children,
                self.confirmer.prestart if settings.backend == "inductor" else None,
            )
        except EagerRunError as error:
            return error, None
        except (pytest.fail.Exception, KeyboardInterrupt) as error:
            # Stopped from outside the model (pytest-timeout's signal fails the test from wherever
            # it runs, Ctrl-C): the test keeps a row that says so, and stops as it was told.
            self.session.record(
                CaseResult(
                    nodeid,
                    Status.NOT_JUDGED,
                    f"the check was stopped before its verdict: {error_signature(error)}",
                )
            )
            raise
        return None, self._record_outcome(nodeid, outcome, settings, record_property)

    def _record_outcome(
        self,
        nodeid: str,
        outcome: CheckOutcome,
        settings: CheckSettings,
        record_property: Callable[[str, object], None] | None,
    ) -> str | None:
        """Record a check's outcome, with a repro of its failing graph where the compiler is at
        fault. Returns the message the test fails with, None where it does not fail."""
        refuse_config_value(settings, outcome)
        result = _case_result(nodeid, outcome)
        if outcome.status.is_compiler_failure and outcome.failing_graphs:
            failing, *others = outcome.failing_graphs
            notes = [failing.note] if failing.note else []
            if others:
                notes.append(f"{len(others)} other graph(s) of this check also deviate")
            self._record_failing_graph(result, failing, settings, notes, outcome.recurs)
        self.session.record(result)
        if record_property is not None:
            for name, value in junit_properties(result, self.layout.public):
                record_property(name, value)
        if not outcome.passed and result.status is not Status.UNCONFIRMED:
            return failure_message(result, outcome, self.layout)
        return None

    def _write_repro(
        self,
        result: CaseResult,
        failing: FailingGraph,
        settings: CheckSettings,
        notes: list[str],
        non_float_failure: bool,
    ) -> tuple[str, str]:
        kind = result.status.failure_kind
        assert kind is not None, f"a {result.status} check writes no repro"
        graph, inputs, dynamo = failing.graph, failing.inputs, failing.dynamo
        error = graph.compile_error or graph.runtime_error
        if inputs is None:
            inputs = graph.synthesized_inputs(settings.seed)
            notes = [
                *notes,
                "inputs are random values of the traced shapes: the graph failed before it ran",
            ]
        if dynamo is not None:  # the graph Dynamo captured, compiled through the whole stack
            gm, label, config_source, sizes, level = (
                dynamo.gm,
                dynamo.label,
                dynamo.config_source,
                [],
                DYNAMO,
            )
        else:
            gm, label, config_source, sizes, level = (
                failing.gm if failing.gm is not None else graph.gm,
                graph.label,
                graph.config_source,
                graph.symbolic_sizes,
                POST_AOT,
            )
        public = self.layout.public
        case = ReproCase(
            gm=gm,
            inputs=inputs,
            kind=kind,
            title=public(f"{result.nodeid} :: {label}"),
            tol=settings.tolerance,
            check_non_float=not settings.ignore_non_float,
            non_float_failure=non_float_failure,
            expected_error=error_signature(error)
            if error is not None and kind != FailureKind.ACCURACY
            else None,
            error_pattern=settings.check_str,
            config_source=config_source,
            grad_enabled=graph.kind != "inference" and torch.is_grad_enabled(),
            symbolic_sizes=sizes,
            status_line=public(f"{result.status}: {result.message}"),
            notes=[public(note) for note in notes],
            level=level,
        )
        path = write_case(case, self.session.repro_root, slugify(result.nodeid), self.session.token)
        return path.parent.name, str(path)

    def _record_failing_graph(
        self,
        result: CaseResult,
        failing: FailingGraph,
        settings: CheckSettings,
        notes: list[str],
        recurs: bool,
    ) -> None:
        """``result``'s repro written from ``failing``, confirmed in a fresh process and queued
        for minifying. ``recurs``: the check's compiled code, run again on the same inputs,
        failed again (:attr:`CheckOutcome.recurs`)."""
        result.graph = failing.dynamo.label if failing.dynamo is not None else failing.graph.label
        failing = self._host_copy(result, failing)
        non_float = failing.non_float_only or Comparison(result.leaves).fails_only_in_non_float
        try:
            result.case_id, path = self._write_repro(result, failing, settings, notes, non_float)
        except OSError as error:
            # The check's verdict stands; only its repro is missing.
            result.repro_unwritten = str(error)
            return
        result.repro_path = path
        if self.session.devices_lost_in != result.nodeid and self._unreproduced(
            result, path, settings, recurs
        ):
            return
        if settings.minify and settings.backend == "inductor" and result.repro_defect is None:
            job = MinifyJob(
                result.case_id, result.nodeid, result.repro_path, settings.minify_timeout
            )
            self.session.queue_minify_job(job)

    def _host_copy(self, result: CaseResult, failing: FailingGraph) -> FailingGraph:
        """A runtime failure's graph and inputs as its failing call's own copy on the host,
        readable even where the error left the device unusable (then said in ``result``)."""
        host_copy = failing.graph.host_copy
        if result.status is not Status.FAIL_RUNTIME or host_copy is None or failing.gm is not None:
            return failing
        if not host_copy.devices_usable():
            self.session.devices_lost_in = result.nodeid
            result.message += (
                " (a device-side error: the device is unusable to this process from "
                "now on, so its later checks here cannot run)"
            )
        return dataclasses.replace(failing, gm=host_copy.gm, inputs=host_copy.inputs)

    def _unreproduced(
        self, result: CaseResult, path: str, settings: CheckSettings, recurs: bool
    ) -> bool:
        """Whether a fresh process does not fail ``result``'s repro, which is then settled
        (:func:`settle`): nothing to minify. Checked now, so that a repro that cannot run is
        reported at the test that made it. An accuracy finding is a judgement, which a fresh
        process must share; a compile or runtime error was raised by the compiler in this test,
        whatever a repro then shows."""
        result.repro_defect = repro_defect(path)
        if (
            result.repro_defect is not None
            or settings.backend != "inductor"
            or result.status is not Status.FAIL_ACCURACY
        ):
            return False
        unreproduced = self.confirmer.unreproduced(path)
        if unreproduced is None:
            return False
        settle(result, unreproduced, recurs)
        return True

    @contextlib.contextmanager
    def running_test(self, nodeid: str, settings: CheckSettings, watch: bool) -> Iterator[None]:
        """Around one test's call: its plain ``torch.compile`` graphs are checked when ``watch``;
        its compiled models are dropped at the end. The test runs as it would without the plugin
        (its precision, its generators, its config): what the checks need they set up for
        themselves."""
        try:
            if watch:
                with self.watch_graphs(nodeid, settings):
                    yield
            else:
                yield
        finally:
            # Only where the test checked a model: a test that compiled nothing imports no compiler.
            if self.compiled_cache.entries:
                with aside():
                    self.compiled_cache.clear()

    @contextlib.contextmanager
    def watch_graphs(self, nodeid: str, settings: CheckSettings) -> Iterator[None]:
        """Check every graph Inductor compiles while the block runs (plain ``torch.compile``
        calls of the test); fail the test, with a repro per failing graph, if any deviates."""
        checker = GraphChecker(
            settings.tolerance,
            not settings.ignore_non_float,
            settings.intermediates,
            self.probe_children,
            training_tol=settings.tolerance_for(training=True),
            capture=self.plain_compiles,
            on_deviation=self.confirmer.prestart,
            on_lowering=lambda graph: self.confirmer.start(graph_device(graph)),
        )
        self._compiles_under(settings)
        handled = False
        with inductor_config(settings.inductor_config):
            try:
                # Ended first: the training calls a backward followed are judged as it ends.
                with checker.watching():
                    yield
                # The test's call returned: whatever a compiled graph raised into it, it handled.
                handled = True
            finally:
                failures, failed = self._record_graphs(nodeid, checker, settings, handled)
        confirmed = [
            index
            for index, result in enumerate(failed)
            if result.status not in (Status.UNCONFIRMED, Status.HANDLED_ERROR)
        ]
        if confirmed:
            raise CheckFailed(
                graph_failures_message(
                    [failed[index] for index in confirmed],
                    [failures[index] for index in confirmed],
                    self.layout,
                ),
                pytrace=False,
            )

    def _compiles_under(self, settings: CheckSettings) -> None:
        """Ready the test's compiles for the marker's ``inductor_config``, where it gives one:
        code compiled under another one, which Dynamo would serve as it is, is compiled anew."""
        if not settings.inductor_config:
            return
        reset_if_compiled()
        if current_device() is None and settings.backend == "inductor":
            # The config's import below imports the compiler (seconds): a judging child
            # started first imports its own meanwhile, as a fixture's check does. Only
            # without a GPU: with one, a graph's device is known as it is lowered.
            self.confirmer.start(None)

    def _record_graphs(
        self, nodeid: str, checker: GraphChecker, settings: CheckSettings, handled: bool
    ) -> tuple[list[GraphOutcome], list[CaseResult]]:
        """Record a watched test's graphs as the block ends: a result per failing graph, and one
        for the rest. Returns the failures and their results; raises the marker's usage error
        where a compile refused a value of its ``inductor_config``."""
        failures, refusal = config_failures_apart(
            settings, checker.tally.failures + checker.error_failures(handled)
        )
        failed = self._graph_failures(nodeid, failures, settings) if failures else []
        self.session.record(*failed)
        rest = checker.tally.other_graphs_result(nodeid, failures)
        if rest is not None:
            self.session.record(rest)
        checker.release()
        if refusal is not None:
            # In place of what the compile raised into the test: the setting's line alone.
            raise pytest.fail.Exception(refusal.line(MARKER), pytrace=False) from None
        return failures, failed

    def _graph_failures(
        self, nodeid: str, failures: list[GraphOutcome], settings: CheckSettings
    ) -> list[CaseResult]:
        """A result per failing graph of a test, its repro written and confirmed where it is the
        compiler's."""
        results = []
        with aside():
            for failure in failures:
                result = CaseResult(
                    nodeid,
                    failure.status,
                    failure.message,
                    reference=failure.reference,
                    worst_ratio=Comparison(failure.leaves).worst_ratio,
                    leaves=failure.leaves,
                    fallback_random=failure.fallback_random,
                    graphs_judged=1,
                )
                if failure.status.is_compiler_failure:
                    notes = [failure.note] if failure.note else []
                    self._record_failing_graph(result, failure, settings, notes, failure.recurs)
                results.append(result)
        return results


def _case_result(nodeid: str, outcome: CheckOutcome) -> CaseResult:
    """The result a fixture's check records."""
    comparison = outcome.comparison
    return CaseResult(
        nodeid=nodeid,
        status=outcome.status,
        message=outcome.message,
        reference=outcome.reference,
        worst_ratio=comparison.worst_ratio if comparison else None,
        leaves=comparison.leaves if comparison else [],
        compile_seconds=outcome.compile_seconds,
        fallback_random=outcome.fallback_random,
    )


def config_value_refused(
    settings: CheckSettings, error: BaseException | None
) -> ConfigValueRefused | None:
    """The usage error where ``error``, a compile's, names a value of the settings'
    ``inductor_config`` (:func:`refused_config_value`); None where it names none."""
    if error is None or not settings.inductor_config:
        return None
    name = refused_config_value(settings.inductor_config, f"{type(error).__name__}: {error}")
    if name is None:
        return None
    signature = error_signature(error, max_chars=300)
    return ConfigValueRefused(name, settings.inductor_config[name], signature)


def refuse_config_value(settings: CheckSettings, outcome: CheckOutcome) -> None:
    """Raise :class:`ConfigValueRefused` where a check failed to compile on a value of its
    ``inductor_config``: no result of the model's, no repro."""
    if outcome.status is Status.FAIL_COMPILE:
        graphs = outcome.failing_graphs
        refusal = config_value_refused(
            settings, graphs[0].graph.compile_error if graphs else outcome.error
        )
        if refusal is not None:
            raise refusal


def config_failures_apart(
    settings: CheckSettings, failures: list[GraphOutcome]
) -> tuple[list[GraphOutcome], ConfigValueRefused | None]:
    """A test's failing plain graphs, less those whose compile raised on a value of the marker's
    ``inductor_config`` (no result of the compiler's, no repro), and the first such refusal."""
    refusals = {
        id(failure): refusal
        for failure in failures
        if (refusal := config_value_refused(settings, failure.graph.compile_error))
    }
    kept = [failure for failure in failures if id(failure) not in refusals]
    return kept, next(iter(refusals.values()), None)


def _device_checked(
    fn: Callable[..., Any], args: Sequence[Any], kwargs: dict[str, Any]
) -> str | None:
    """The accelerator a check's model runs on, None for the CPU."""
    return device_of(model_tensors(fn, args, kwargs))
