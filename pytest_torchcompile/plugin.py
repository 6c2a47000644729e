"""pytest wiring: options, ini keys, markers and the hooks. No logic lives here; the fixture is
``fixture.py``, registered with this plugin."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest

from pytest_torchcompile import fixture
from pytest_torchcompile.common import options, settings
from pytest_torchcompile.common.roles import Role, role_of
from pytest_torchcompile.minifying.phase import configure as configure_minify_phase
from pytest_torchcompile.minifying.phase import run_minify_phase
from pytest_torchcompile.reporting.layout import TerminalLayout
from pytest_torchcompile.run import report_files
from pytest_torchcompile.run.conclusion import RunEnd
from pytest_torchcompile.run.session import (
    CONFTEST,
    CURRENT_ITEM_KEY,
    INI_FILE,
    SESSION_KEY,
    TEST_FILE,
    AccuracySession,
    narrowed_files,
)
from pytest_torchcompile.run.shard import shard_of

PYTEST_SESSION_KEY = pytest.StashKey[pytest.Session]()
COLLECTED_IDS = "torchcompile_collected_ids"
"""``config.workeroutput`` key: an xdist worker's collected test ids, for the controller."""
SELECTED_IDS = "torchcompile_selected_ids"
"""``config.workeroutput`` key: the collected test ids an xdist worker did not deselect."""
FEATURES_OFF = "torchcompile_features_off"
"""``config.workeroutput`` key: the features the installed torch leaves off, as an xdist worker found."""
ENVIRONMENT = "torchcompile_environment"
"""``config.workeroutput`` key: an xdist worker's environment for the JSON report, as JSON (None without one)."""


def _is_worker(config: pytest.Config) -> bool:
    return role_of(config) is Role.WORKER


def _is_xdist_controller(config: pytest.Config) -> bool:
    return role_of(config) is Role.CONTROLLER


def pytest_addoption(parser: pytest.Parser) -> None:
    options.add_options(parser)


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    pluginmanager.add_hookspecs(report_files.ReportHooks)


def pytest_configure(config: pytest.Config) -> None:
    # Registered here rather than named in pytest_plugins: the package imports the fixture module
    # before pytest reads that list, and pytest would warn that it cannot rewrite its asserts (an
    # error, and every run's exit 4, under -W error).
    if not config.pluginmanager.is_registered(fixture):
        config.pluginmanager.register(fixture, fixture.__name__)
    config.addinivalue_line("markers", settings.MARKER_HELP)
    config.addinivalue_line("markers", "cuda: needs a CUDA device; skipped when none is visible")
    options.check_run_settings(config)
    enabled = bool(options.option_value(config, options.option("compile-accuracy")))
    if enabled:
        options.check_compiler_names(config, _compiler_names)
    directory = options.option_value(config, options.option("compile-accuracy-dir"))
    root = Path(directory) if directory else Path(config.rootpath) / ".compile-accuracy"
    if not root.is_absolute():
        root = Path(config.rootpath) / root
    config.stash[SESSION_KEY] = AccuracySession(
        enabled,
        root,
        settings.session_settings(config),
        _environment,
        shard=shard_of(config),
        compiler_names=_compiler_names if enabled else None,
        config_has=_config_has if enabled else None,
        config_refusal=_config_refusal if enabled else None,
    )
    # pytest's own JUnit file (its junitxml plugin's option, absent where the plugin is off).
    junit = getattr(config.option, "xmlpath", None)
    config.stash[SESSION_KEY].configure_gating(
        settings.gating_settings(config),
        junit=Path(junit) if junit else None,
        inputs=_inputs_known(config),
    )
    if enabled:
        config.stash[SESSION_KEY].stop_on_sigterm()
    if enabled and not _is_xdist_controller(config):
        # Imported only where tests are checked, as below.
        from pytest_torchcompile.checking.runner import check_inductor_cache

        check_inductor_cache()
    configure_minify_phase(config, config.stash[SESSION_KEY])
    if enabled and not _is_xdist_controller(config):
        # Imported only where tests are checked: a run without --compile-accuracy, and an xdist
        # controller, do not import torch for the plugin.
        from pytest_torchcompile.checking.runner import CheckRunner

        config.stash[SESSION_KEY].runner = CheckRunner.start(
            config.stash[SESSION_KEY],
            _layout(config),
            trace_log=bool(
                options.option_value(config, options.option("compile-accuracy-trace-log"))
            ),
            probe_child=not config.option.collectonly
            and config.stash[SESSION_KEY].base_settings.intermediates,
        )
    if not _is_worker(config):
        config.pluginmanager.register(
            ControllerHooks(config.stash[SESSION_KEY], config), "torchcompile-controller"
        )
        report_files.register(config, config.stash[SESSION_KEY].report_files)


def _inputs_known(config: pytest.Config) -> list[tuple[str, Path | None]]:
    """The files the run reads that are known before collection: the ini file, the conftest.py
    files loaded, the test files named on the command line."""
    named = (Path(config.invocation_params.dir, arg.split("::", 1)[0]) for arg in config.args)
    return [
        (INI_FILE, config.inipath),
        *(
            (CONFTEST, Path(plugin.__file__))
            for plugin in config.pluginmanager.get_plugins()
            if Path(getattr(plugin, "__file__", None) or "").name == "conftest.py"
        ),
        *((TEST_FILE, path) for path in named if path.is_file()),
    ]


def _compiler_names(keyword: str) -> list[str]:
    # Asked only of a backend or mode a run names (not the defaults): a run that names none, and
    # a run without --compile-accuracy, do not import torch for it.
    from pytest_torchcompile.torch_internals.compiling import compiler_names

    return compiler_names(keyword)


def _config_has(name: str) -> bool:
    # Asked only of the names a marker's or the fixture's inductor_config gives, whose check
    # imports Inductor's config anyway: other runs do not import it for this.
    from pytest_torchcompile.torch_internals.config import inductor_config_has

    return inductor_config_has(name)


def _config_refusal(name: str, value: Any) -> str | None:
    # As _config_has.
    from pytest_torchcompile.torch_internals.config import inductor_config_refusal

    return inductor_config_refusal(name, value)


def _environment() -> dict[str, Any]:
    # Asked for only where a JSON report is written: other runs do not import torch for it.
    from pytest_torchcompile.torch_internals.environment import report_environment

    return report_environment()


def pytest_sessionstart(session: pytest.Session) -> None:
    session.config.stash[PYTEST_SESSION_KEY] = session
    if not _is_worker(session.config):
        _tell_deprecated_names(session.config)


def _tell_deprecated_names(config: pytest.Config) -> None:
    # Printed, not warned: a run under -W error must not fail for an old option name.
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    for message in options.deprecated_uses(config):
        line = f"PytestTorchcompileDeprecation: {message}"
        if reporter is not None:
            reporter.write_line(line, yellow=True)
        else:
            sys.stderr.write(f"{line}\n")


def pytest_itemcollected(item: pytest.Item) -> None:
    item.config.stash[SESSION_KEY].note_collected([item.nodeid])


def pytest_collection_finish(session: pytest.Session) -> None:
    state = session.config.stash[SESSION_KEY]
    state.note_selected(item.nodeid for item in session.items)
    if _is_worker(session.config):
        session.config.workeroutput[COLLECTED_IDS] = sorted(state.collected_ids)  # type: ignore[attr-defined]
        session.config.workeroutput[SELECTED_IDS] = sorted(state.selected_ids)  # type: ignore[attr-defined]


def _refuse_outputs_at_tests(config: pytest.Config, test_ids: Iterable[str]) -> None:
    """Stop the run before any test where an output is at a file of the tests collected. The
    run then writes none of its files, and neither does pytest's JUnit plugin, which would
    write its file as the session ends whatever the exit status."""
    try:
        config.stash[SESSION_KEY].refuse_outputs_at_tests(config.rootpath, test_ids)
    except pytest.UsageError:
        key = getattr(config.pluginmanager.get_plugin("junitxml"), "xml_key", None)
        if isinstance(key, pytest.StashKey) and key in config.stash:
            # As the JUnit plugin's own pytest_unconfigure ends its writer.
            config.pluginmanager.unregister(config.stash[key])
            del config.stash[key]
        raise


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    report = yield
    item.config.stash[SESSION_KEY].annotate_report(item, report, call.excinfo)
    return report


class ControllerHooks:
    """Registered on the controller (or the only process): receives what the tests' processes
    found, via their reports and, under xdist, the workers' output."""

    def __init__(self, state: AccuracySession, config: pytest.Config) -> None:
        self.state = state
        self.config = config
        self.not_collected: set[str] = set()
        """The files whose collection failed: read, though they hold no test collected."""

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        if report.failed:
            self.not_collected.add(report.nodeid)

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        # The only process; an xdist controller collects nothing (its workers' ids come below).
        _refuse_outputs_at_tests(self.config, [*self.state.collected_ids, *self.not_collected])

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self.state.receive_report(report)

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node: Any, ids: list[str]) -> None:
        # Before any test is scheduled: a worker's tests are sent once every worker collected.
        _refuse_outputs_at_tests(self.config, [*ids, *self.not_collected])

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        output = getattr(node, "workeroutput", None) or {}
        self.state.note_collected(output.get(COLLECTED_IDS, ()))
        self.state.note_selected(output.get(SELECTED_IDS, ()))
        self.state.note_features_off(output.get(FEATURES_OFF, ()))
        environment = output.get(ENVIRONMENT)
        self.state.note_environment(None if environment is None else json.loads(environment))


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    item.config.stash[CURRENT_ITEM_KEY] = item
    if item.get_closest_marker("cuda") is not None:
        # Only for a test marked cuda: other runs do not import torch for the plugin.
        import torch

        if not torch.cuda.is_available():
            pytest.skip("needs a CUDA device")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Any:
    state = item.config.stash[SESSION_KEY]
    item.config.stash[CURRENT_ITEM_KEY] = item
    marker = item.get_closest_marker("inductor_repro")
    scope = options.option_value(item.config, options.option("compile-accuracy-scope"))
    watch = scope == "all" or marker is not None
    try:
        test_settings = state.settings_for(item, {})
    except pytest.UsageError as error:
        # The test's own error, in one line: the plugin's frames say nothing to its author.
        raise pytest.fail.Exception(str(error), pytrace=False) from None
    with state.running_test(item.nodeid, test_settings, watch):
        return (yield)


def pytest_sessionfinish(session: pytest.Session) -> None:
    config = session.config
    config.stash[SESSION_KEY].note_features_off()
    if _is_worker(config):
        config.workeroutput[FEATURES_OFF] = config.stash[SESSION_KEY].features_off  # type: ignore[attr-defined]
        # As JSON text: execnet carries only builtin types, and the report is JSON anyway.
        environment = config.stash[SESSION_KEY].environment
        shown = None if environment is None else json.dumps(environment, default=repr)
        config.workeroutput[ENVIRONMENT] = shown  # type: ignore[attr-defined]
    if run_minify_phase(config, config.stash[SESSION_KEY]):
        session.exitstatus = pytest.ExitCode.INTERRUPTED
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None and not _is_worker(config):
        config.stash[SESSION_KEY].name_minified_in_failures(
            reporter.stats.get("failed", []), _layout(config)
        )


def _exitstatus(config: pytest.Config) -> int | None:
    session = config.stash.get(PYTEST_SESSION_KEY, None)
    return None if session is None else int(session.exitstatus)


def _layout(config: pytest.Config) -> TerminalLayout:
    return TerminalLayout.of(config)


@pytest.hookimpl(trylast=True)
def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    # trylast, and after pytest_sessionfinish: the minify phase has filled in its results.
    state = config.stash.get(SESSION_KEY, None)
    if state is None or _is_worker(config):
        return
    end = _end_run(config, state, _exitstatus(config))
    if end.lines:
        terminalreporter.section("compile accuracy")
        for line in end.lines:
            terminalreporter.write_line(
                line, red=line.startswith("ERROR"), yellow=line.startswith("WARNING")
            )
    if end.failures:
        terminalreporter.write_line(f"compile accuracy: {end.heading}:", red=True, bold=True)
        for line in end.failure_lines:
            terminalreporter.write_line(line, red=True)


def pytest_unconfigure(config: pytest.Config) -> None:
    # After the terminal summary, which judged the run; without one (--no-summary, -p no:terminal)
    # the run is judged and its files written here. pytest returns the exit status set here.
    state = config.stash.get(SESSION_KEY, None)
    session = config.stash.get(PYTEST_SESSION_KEY, None)
    if state is not None:
        state.close()
    ended = session is not None and session.exitstatus in (
        pytest.ExitCode.OK,
        pytest.ExitCode.TESTS_FAILED,
    )
    if state is not None and session is not None and ended and not _is_worker(config):
        end = _end_run(config, state, int(session.exitstatus))
        session.exitstatus = end.exit_status(session.exitstatus, session.testsfailed)
    report_files.unregister(config)


def _end_run(config: pytest.Config, state: AccuracySession, exitstatus: int | None) -> RunEnd:
    """The run judged (once), its report files written through their hook."""
    write = report_files.hook_writing(config)
    return state.end_run(narrowed_files(config), _layout(config), exitstatus, write)
