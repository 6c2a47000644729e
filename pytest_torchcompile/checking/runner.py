"""The checks of the tests this process runs, where ``--compile-accuracy`` is on: the fixture's
model checks and the plain ``torch.compile`` graphs of watched tests, each failing graph written
as a repro and queued for the minify phase. The only part of a session that needs torch."""

from __future__ import annotations

import contextlib
import functools
import os
import shlex
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
from pytest_torchcompile.checking.model import check_model
from pytest_torchcompile.checking.outcome import (
    CheckOutcome,
    EagerRunError,
    FailingGraph,
    GraphOutcome,
)
from pytest_torchcompile.checking.plain import GraphChecker
from pytest_torchcompile.checking.plain_tally import SAME_PRECISION
from pytest_torchcompile.checking.runs import model_tensors, unjudgeable_input
from pytest_torchcompile.common.files import unusable_directory, unwritable_directory
from pytest_torchcompile.common.kinds import FailureKind
from pytest_torchcompile.common.leaves import shown_table
from pytest_torchcompile.common.results import CaseResult
from pytest_torchcompile.common.run_state import MinifyJob, RunState
from pytest_torchcompile.common.settings import (
    MARKER,
    CheckSettings,
    ConfigValueRefused,
    refused_config_value,
)
from pytest_torchcompile.common.verdict import CheckFailed, Comparison, Status
from pytest_torchcompile.judging.capture import CapturedGraph, DynamoGraph, GraphCapture
from pytest_torchcompile.judging.case import ReproCase
from pytest_torchcompile.judging.judge import DYNAMO, POST_AOT, error_signature
from pytest_torchcompile.reporting.junit import junit_properties
from pytest_torchcompile.reporting.layout import TerminalLayout
from pytest_torchcompile.repros.repro import repro_defect, slugify, write_case
from pytest_torchcompile.torch_internals.availability import core_missing, features_off
from pytest_torchcompile.torch_internals.compiling import (
    compiler_imported,
    quiet_trace_log,
    reset_if_compiled,
)
from pytest_torchcompile.torch_internals.config import inductor_config
from pytest_torchcompile.torch_internals.environment import (
    INDUCTOR_CACHE_VARIABLE,
    inductor_cache,
)
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
        refuse_config_value(settings, outcome)
        result = CaseResult(
            nodeid=nodeid,
            status=outcome.status,
            message=outcome.message,
            reference=outcome.reference,
            worst_ratio=outcome.comparison.worst_ratio if outcome.comparison else None,
            leaves=outcome.comparison.leaves if outcome.comparison else [],
            compile_seconds=outcome.compile_seconds,
            fallback_random=outcome.fallback_random,
        )
        if outcome.status.is_compiler_failure and outcome.failing_graphs:
            failing = outcome.failing_graphs[0]
            others = len(outcome.failing_graphs) - 1
            notes = [
                note
                for note in (
                    failing.note,
                    f"{others} other graph(s) of this check also deviate" if others else "",
                )
                if note
            ]
            self._record_failing_graph(result, failing, settings, notes, outcome.recurs)
        self.session.record(result)
        if record_property is not None:
            for name, value in junit_properties(result, self.layout.public):
                record_property(name, value)
        if not outcome.passed and result.status is not Status.UNCONFIRMED:
            return None, failure_message(result, outcome, self.layout)
        return None, None

    def _write_repro(
        self,
        nodeid: str,
        graph: CapturedGraph,
        inputs: list[Any] | None,
        status: Status,
        message: str,
        settings: CheckSettings,
        notes: list[str],
        gm: torch.fx.GraphModule | None,
        dynamo: DynamoGraph | None = None,
        non_float_failure: bool = False,
    ) -> tuple[str, str]:
        kind = status.failure_kind
        assert kind is not None, f"a {status} check writes no repro"
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
                gm if gm is not None else graph.gm,
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
            title=public(f"{nodeid} :: {label}"),
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
            status_line=public(f"{status}: {message}"),
            notes=[public(note) for note in notes],
            level=level,
        )
        path = write_case(case, self.session.repro_root, slugify(nodeid), self.session.token)
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
        graph, inputs, gm, dynamo = failing.graph, failing.inputs, failing.gm, failing.dynamo
        non_float_only = failing.non_float_only
        result.graph = dynamo.label if dynamo is not None else graph.label
        if result.status is Status.FAIL_RUNTIME and graph.host_copy is not None and gm is None:
            # The failing call's own copy, readable even where the error left the device unusable.
            gm, inputs = graph.host_copy.gm, graph.host_copy.inputs
            if not graph.host_copy.devices_usable():
                self.session.devices_lost_in = result.nodeid
                result.message += (
                    " (a device-side error: the device is unusable to this process from "
                    "now on, so its later checks here cannot run)"
                )
        try:
            result.case_id, result.repro_path = self._write_repro(
                result.nodeid,
                graph,
                inputs,
                result.status,
                result.message,
                settings,
                notes,
                gm,
                dynamo,
                non_float_only or Comparison(result.leaves).fails_only_in_non_float,
            )
        except OSError as error:
            # The check's verdict stands; only its repro is missing.
            result.repro_unwritten = str(error)
            return
        if self.session.devices_lost_in != result.nodeid:
            # Checked now, so that a repro that cannot run is reported at the test that made it.
            result.repro_defect = repro_defect(result.repro_path)
            # An accuracy finding is a judgement, which a fresh process must share; a compile or
            # runtime error was raised by the compiler in this test, whatever a repro then shows.
            if (
                result.repro_defect is None
                and settings.backend == "inductor"
                and result.status is Status.FAIL_ACCURACY
            ):
                unreproduced = self.confirmer.unreproduced(result.repro_path)
                if unreproduced is not None:
                    # Nothing to minify: a fresh process does not fail the repro.
                    settle(result, unreproduced, recurs)
                    return
        if settings.minify and settings.backend == "inductor" and result.repro_defect is None:
            job = MinifyJob(
                result.case_id, result.nodeid, result.repro_path, settings.minify_timeout
            )
            self.session.queue_minify_job(job)

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
        if settings.inductor_config:
            # The marker asks for the test's compiles under this config: code compiled under
            # another one, which Dynamo would serve as it is, is compiled anew.
            reset_if_compiled()
            if current_device() is None and settings.backend == "inductor":
                # The config's import below imports the compiler (seconds): a judging child
                # started first imports its own meanwhile, as a fixture's check does. Only
                # without a GPU: with one, a graph's device is known as it is lowered.
                self.confirmer.start(None)
        handled = False
        with inductor_config(settings.inductor_config):
            try:
                # Ended first: the training calls a backward followed are judged as it ends.
                with checker.watching():
                    yield
                # The test's call returned: whatever a compiled graph raised into it, it handled.
                handled = True
            finally:
                failures, refusal = config_failures_apart(
                    settings, checker.tally.failures + checker.error_failures(handled)
                )
                failed = self._graph_failures(nodeid, failures, settings) if failures else []
                self.session.record(*failed)
                rest = other_graphs_result(nodeid, checker, failures)
                if rest is not None:
                    self.session.record(rest)
                checker.release()
                if refusal is not None:
                    # In place of what the compile raised into the test: the setting's line alone.
                    raise pytest.fail.Exception(refusal.line(MARKER), pytrace=False) from None
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


def other_graphs_result(
    nodeid: str, checker: GraphChecker, failures: list[GraphOutcome]
) -> CaseResult | None:
    """The check standing for a test's plain graphs that did not fail: those judged (they pass)
    and what could not be judged, with the reasons. None when there are neither, so that a test
    that compiled nothing has no check."""
    failing = {failure.graph.index for failure in failures}
    passed = [ratio for index, ratio in checker.tally.judged.items() if index not in failing]
    if not passed and not checker.tally.unchecked:
        return None
    parts = [f"{len(passed)} graph(s) pass"] if passed else []
    if checker.tally.unchecked:
        parts.append(f"{len(checker.tally.unchecked)} unchecked")
    # A graph that passed without its fp64 reference passed the weaker, labelled check only.
    failed = {
        failure.dynamo.label if failure.dynamo is not None else failure.graph.label
        for failure in failures
    }
    without_fp64 = [
        f"{label}: {why}"
        for label, why in checker.tally.without_fp64.items()
        if label not in failed
    ]
    status = (
        Status.NOT_JUDGED
        if not passed
        else Status.NO_FP64_REFERENCE
        if without_fp64
        else Status.PASS
    )
    ratios = [ratio for ratio in passed if ratio is not None]
    return CaseResult(
        nodeid,
        status,
        ", ".join(parts),
        reference=f"{SAME_PRECISION}: {'; '.join(without_fp64)}" if without_fp64 else "fp64",
        worst_ratio=max(ratios, default=None),
        graphs_judged=len(passed),
        unchecked=list(checker.tally.unchecked),
    )


def relative(path: str) -> str:
    try:
        return os.path.relpath(path)
    except ValueError:
        return path


def failure_message(result: CaseResult, outcome: CheckOutcome, layout: TerminalLayout) -> str:
    lines = [f"compile accuracy: {result.status}: {result.message}"]
    if outcome.comparison is not None and outcome.comparison.leaves:
        lines.append(f"reference: {outcome.reference}")
        lines.append(shown_table(outcome.comparison.leaves, layout.width))
    if result.graph:
        lines.append(f"failing graph: {result.graph}")
    lines += _repro_lines(result)
    if (
        not result.repro_path
        and result.repro_unwritten is None
        and result.status.is_compiler_failure
    ):
        lines.append(
            "no repro: no graph reached Inductor"
            if not outcome.graphs
            else "no repro: the failing graph could not be identified"
        )
    return layout.fit(layout.public("\n".join(lines)))


def graph_failures_message(
    results: list[CaseResult], failures: list[GraphOutcome], layout: TerminalLayout
) -> str:
    lines = [f"compile accuracy: {len(failures)} graph(s) compiled by this test fail"]
    for result, failure in zip(results, failures, strict=True):
        lines.append(f"{result.status}: {failure.message}")
        if failure.leaves:
            lines.append(shown_table(failure.leaves, layout.width))
        lines += _repro_lines(result)
    return layout.fit(layout.public("\n".join(lines)))


def _repro_lines(result: CaseResult) -> list[str]:
    if result.repro_unwritten is not None:
        return [f"repro not written: {result.repro_unwritten}"]
    if not result.repro_path:
        return []
    if result.repro_defect is not None:
        return [
            f"repro: {result.repro_path}",
            f"the repro is broken, a defect of pytest-torchcompile (please report it): {result.repro_defect}",
        ]
    # Quoted for the shell it is pasted into: a repro directory may hold spaces or a ``$``.
    return [
        f"repro: {result.repro_path}",
        f"rerun: python {shlex.quote(relative(result.repro_path))}",
    ]


def _device_checked(
    fn: Callable[..., Any], args: Sequence[Any], kwargs: dict[str, Any]
) -> str | None:
    """The accelerator a check's model runs on, None for the CPU."""
    return device_of(model_tensors(fn, args, kwargs))
