"""The option table (:data:`OPTIONS`): each command-line flag, its ini twin and the environment
variable that stands in for it, read with precedence command line > ini > environment > default;
the run-level environment variables; the check, at the run's start, of every value given."""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from pytest_torchcompile.common.allowed import (
    SETUP_ENV,
    Allowed,
    Choice,
    CompilerName,
    CompilerNames,
    Devices,
    Flag,
    Number,
    OfType,
    SetupModules,
    check_compiler_name,
    checked,
)
from pytest_torchcompile.common.devices import DEVICES_ENV
from pytest_torchcompile.common.leaves import FULL_TABLE_VARIABLE
from pytest_torchcompile.common.verdict import DEFAULT_TOLERANCE, TRAINING_TOLERANCE

TEXT = OfType("text")
"""What an option takes where it names nothing else: any text."""


@dataclass(frozen=True)
class Option:
    """One command-line flag and its ini twin."""

    name: str
    help: str
    default: Any
    allowed: Allowed = TEXT
    flag: bool = False
    negatable: bool = False
    setting: str | None = None
    metavar: str | None = None
    old_name: str | None = None
    """The name before every option took the ``compile-accuracy`` prefix: a deprecated alias on
    the command line and in the ini file, for one release."""
    env: str | None = None
    """The environment variable that gives it where neither the command line nor the ini does."""

    @property
    def dest(self) -> str:
        return self.name.replace("-", "_")

    @property
    def old_dest(self) -> str | None:
        return None if self.old_name is None else self.old_name.replace("-", "_")


FLAG = Flag()
THREADS_ENV = "PYTEST_TORCHCOMPILE_THREADS"
MOST_THREADS = 1024
"""The most CPU threads a process of the run is given: far more than any CPU has, and far below
what OpenMP and ``torch.set_num_threads`` fail at (an overflow, or a crash of the process)."""
MOST_PROCESSES = 1024
"""The most processes that minify at once: more than any run starts."""
MOST_MINIFY_TIMEOUT_S = 86400.0
"""A day, the longest budget for minifying one case: each candidate's reply from the judging
process is awaited that long, and the wait of the operating system's poll ends at about 24 days
(2**31 milliseconds), a longer one an OverflowError."""
OPTIONS: tuple[Option, ...] = (
    Option(
        "compile-accuracy",
        "check models compiled with torch.compile (Inductor) against fp64 "
        "references; off, the compile_accuracy fixture only runs the model eagerly",
        False,
        FLAG,
        flag=True,
    ),
    Option(
        "compile-accuracy-dir",
        "where repro and minified files go (default: <rootdir>/.compile-accuracy)",
        "",
        metavar="DIR",
    ),
    Option(
        "compile-accuracy-backend",
        "torch.compile backend; repros and minification need 'inductor'",
        "inductor",
        CompilerName(
            "a torch.compile backend",
            keyword="backend",
            listed_by="torch.compiler.list_backends(exclude_tags=()) lists them",
            callable_too=True,
        ),
        setting="backend",
        metavar="NAME",
        old_name="compile-backend",
    ),
    Option(
        "compile-accuracy-mode",
        "torch.compile mode: default, reduce-overhead, max-autotune, max-autotune-no-cudagraphs",
        None,
        CompilerName(
            "a torch.compile mode",
            keyword="mode",
            listed_by="torch._inductor.list_mode_options() lists them",
            default=("default",),
        ),
        setting="mode",
        metavar="MODE",
        old_name="compile-mode",
    ),
    Option(
        "compile-accuracy-scope",
        "which tests get their plain torch.compile calls checked graph by "
        "graph: 'all', or 'marked' (only tests marked inductor_repro)",
        "all",
        Choice(choices=("all", "marked")),
        metavar="SCOPE",
    ),
    Option(
        "compile-accuracy-tol",
        "tolerance of the allclose shortcut and the fp64 rule's "
        f"additive slack (tol/10); default {DEFAULT_TOLERANCE:g}, {TRAINING_TOLERANCE:g} for "
        "checks of a training step (backward=True or steps)",
        None,
        Number(optional=True),
        setting="tol",
        metavar="TOL",
    ),
    Option(
        "compile-accuracy-intermediates",
        "also judge every floating intermediate of each "
        "compiled graph, so a deviation that later ops mask is caught (default on; "
        "--no-compile-accuracy-intermediates turns it off)",
        True,
        FLAG,
        flag=True,
        negatable=True,
        setting="intermediates",
    ),
    Option(
        "compile-accuracy-minify",
        "minify every failing case into minified.py (default on; "
        "--no-compile-accuracy-minify turns it off)",
        True,
        FLAG,
        flag=True,
        negatable=True,
        setting="minify",
        old_name="compile-minify",
    ),
    Option(
        "compile-accuracy-minify-expected",
        "with a baseline: also minify the failures it expects "
        "(expected failures and flaky rows; default on; --no-compile-accuracy-minify-expected "
        "skips them, their repro is still written)",
        True,
        FLAG,
        flag=True,
        negatable=True,
        old_name="compile-minify-expected",
    ),
    Option(
        "compile-accuracy-minify-timeout",
        "time budget in seconds for minifying one case; the "
        "best result so far is kept, labelled not minimal",
        300.0,
        Number(above=True, most=MOST_MINIFY_TIMEOUT_S),
        setting="minify_timeout",
        metavar="SECONDS",
        old_name="compile-minify-timeout",
    ),
    Option(
        "compile-accuracy-minify-workers",
        "with xdist: at most N processes minify at once (GPU "
        "memory); 0: every worker whose tests are done",
        0,
        Number(whole=True, most=MOST_PROCESSES),
        metavar="N",
        old_name="compile-minify-workers",
    ),
    Option(
        "compile-accuracy-threads",
        "CPU threads for each process of the run (OpenMP, Inductor's compile "
        "workers, their child processes); default: the CPUs shared among the xdist workers, "
        "torch's defaults without xdist; 0: torch's defaults (env PYTEST_TORCHCOMPILE_THREADS)",
        None,
        Number(whole=True, most=MOST_THREADS),
        metavar="N",
        old_name="compile-threads",
        env=THREADS_ENV,
    ),
    Option(
        "compile-accuracy-devices",
        "CUDA devices for xdist workers: worker gwK uses entry K mod len "
        "(default: all visible; env PYTEST_TORCHCOMPILE_DEVICES); a single process uses the "
        "first",
        (),
        Devices(),
        metavar="LIST",
        old_name="compile-devices",
        env=DEVICES_ENV,
    ),
    Option(
        "compile-accuracy-baseline",
        "baseline file: the expected status of each test id; a "
        "known failure xfails, a new one fails, a fixed one is reported IMPROVED (relative "
        "paths: to the current directory on the command line, to the rootdir in the ini file)",
        "",
        metavar="PATH",
    ),
    Option(
        "compile-accuracy-update-baseline",
        "write the baseline file from this run's statuses, "
        "keeping the rows (and notes) of tests that did not run; the compile-accuracy failures "
        "it records do not fail this run (they still show)",
        False,
        FLAG,
        flag=True,
    ),
    Option(
        "compile-accuracy-strict",
        "with a baseline: an IMPROVED test (a recorded failure that "
        "now passes) or a row naming a test that no longer exists fails the run",
        False,
        FLAG,
        flag=True,
    ),
    Option(
        "compile-accuracy-trace-log",
        "keep the DEBUG records of torch's structured-trace logger "
        "(torch.__trace: hundreds of empty lines per compile) in captured logs; without it they are "
        "dropped unless TORCH_TRACE is set",
        False,
        FLAG,
        flag=True,
    ),
    Option(
        "compile-accuracy-report",
        "write a JSON report of every check to PATH (schema: docs/reports.md, "
        "'CI gating and reports')",
        "",
        metavar="PATH",
    ),
    Option(
        "compile-accuracy-html",
        "write an HTML report to PATH: one self-contained page (statuses, and for each failing "
        "check its error table, where in the graph the deviation starts, the minifier's "
        "trajectory, its stage and files)",
        "",
        metavar="PATH",
    ),
)


def option(name: str) -> Option:
    return next(o for o in OPTIONS if o.name == name)


def add_options(parser: pytest.Parser) -> None:
    group = parser.getgroup("torchcompile", "torch.compile accuracy (pytest-torchcompile)")
    for option in OPTIONS:
        _add_flags(group, option.name, option.dest, option, option.help)
        # Unset is "" (the default applies then), so that an old key set in its place is seen.
        parser.addini(option.dest, option.help, type="string", default="")
        if option.old_name is not None and option.old_dest is not None:
            # Hidden from --help; its own dest, so that a use of it can be told apart and named.
            _add_flags(group, option.old_name, option.old_dest, option, argparse.SUPPRESS)
            parser.addini(
                option.old_dest, f"deprecated: use {option.dest}", type="string", default=""
            )


def _add_flags(group: pytest.OptionGroup, name: str, dest: str, option: Option, help: str) -> None:
    if option.flag:
        group.addoption(f"--{name}", action="store_true", default=None, dest=dest, help=help)
        if option.negatable:
            group.addoption(
                f"--no-{name}",
                action="store_false",
                dest=dest,
                help=help if help == argparse.SUPPRESS else f"turn off --{name}",
            )
    else:
        group.addoption(f"--{name}", default=None, dest=dest, metavar=option.metavar, help=help)


def _given(config: pytest.Config, option: Option) -> tuple[Any, str] | None:
    """What the command line, else the ini file, gives for ``option`` under its name or its old
    one, with where as the user wrote it (the flag, or ``ini`` and the key), so that a value not
    taken is named as given; None where neither gives it."""
    for dest, flag in ((option.dest, option.name), (option.old_dest, option.old_name)):
        value = None if dest is None else config.getoption(dest)
        if value is not None:
            return value, f"--{flag}"
    for dest in (option.dest, option.old_dest):
        ini = "" if dest is None else config.getini(dest)
        if ini != "":
            return ini, f"ini {dest}"
    return None


def option_value(config: pytest.Config, option: Option) -> Any:
    """Command line over ini over the environment over default; a usage error for a value the
    option does not take."""
    given = _given(config, option)
    if given is not None:
        return checked(option.allowed, *given)
    if option.env is not None:
        return environment_value(option.env, option.allowed, option.default)
    return option.default


def environment_value(name: str, allowed: Allowed, default: Any) -> Any:
    """The value of environment variable ``name``, else ``default`` where it is unset or blank;
    a usage error for a value it does not take."""
    text = os.environ.get(name, "").strip()
    return checked(allowed, text, name) if text else default


def deprecated_uses(config: pytest.Config) -> list[str]:
    """A message for each old option name or ini key this run was given."""
    messages = []
    for option in OPTIONS:
        if option.old_name is None or option.old_dest is None:
            continue
        value = config.getoption(option.old_dest)
        if value is not None:
            negated = "no-" if value is False else ""
            messages.append(
                f"--{negated}{option.old_name} is deprecated: use --{negated}{option.name} "
                "(the old name goes in the next release)"
            )
        if config.getini(option.old_dest) != "":
            messages.append(
                f"ini key {option.old_dest} is deprecated: use {option.dest} "
                "(the old key goes in the next release)"
            )
    return messages


def path_value(config: pytest.Config, option: Option) -> Path | None:
    """A path option: None when unset; a relative path is taken from the current directory when
    given on the command line, from the rootdir (the ini file's directory) when set in the ini."""
    value = config.getoption(option.dest)
    base = Path(config.invocation_params.dir)
    if value is None:
        value = config.getini(option.dest)
        base = Path(config.rootpath)
    if not value:
        return None
    path = Path(value).expanduser()
    return path if path.is_absolute() else base / path


def check_compiler_names(config: pytest.Config, compiler_names: CompilerNames) -> None:
    """A usage error where the command line or the ini file names a backend or a mode that the
    installed torch does not know; torch is not asked about the defaults."""
    for option in OPTIONS:
        given = _given(config, option)
        if given is not None:
            value = checked(option.allowed, *given)
            if value != option.default:
                check_compiler_name(option.allowed, value, given[1], compiler_names)


LEASE_ENV = "PYTEST_TORCHCOMPILE_LEASE_S"
DEFAULT_LEASE_S = 30.0


def lease_s() -> float:
    """``PYTEST_TORCHCOMPILE_LEASE_S``: seconds without a heartbeat after which a minify job is
    taken back from the process that claimed it."""
    return float(environment_value(LEASE_ENV, Number(above=True), DEFAULT_LEASE_S))


def setup_modules() -> tuple[str, ...]:
    """``PYTEST_TORCHCOMPILE_SETUP``'s modules and files; a usage error for one not there, on
    which every judging process would fail to start."""
    entries: tuple[str, ...] = environment_value(SETUP_ENV, SetupModules(), ())
    return entries


CONCURRENT_PROBE_ENV = "PYTEST_TORCHCOMPILE_CONCURRENT_PROBE"
"""``0`` probes every graph in this process (as a comparison, or where a second process per
pytest process is unwelcome); ``1`` probes every graph that can be in a child, whatever its size
and this process's threads."""
ZERO_OR_ONE = Choice(choices=("0", "1"))


def concurrent_probe() -> str | None:
    """``PYTEST_TORCHCOMPILE_CONCURRENT_PROBE``: ``"0"``, ``"1"``, or None where it is unset."""
    chosen: str | None = environment_value(CONCURRENT_PROBE_ENV, ZERO_OR_ONE, None)
    return chosen


def check_run_settings(config: pytest.Config) -> None:
    """A usage error, before anything of the run starts, for any option, ini key or
    environment variable of the plugin given a value it does not take."""
    for option in OPTIONS:
        option_value(config, option)
    lease_s()
    concurrent_probe()
    setup_modules()
    environment_value(FULL_TABLE_VARIABLE, ZERO_OR_ONE, None)
