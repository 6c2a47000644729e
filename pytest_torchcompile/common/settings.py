"""The plugin's options: one table drives the command line, the ini file, the marker and the
fixture's keyword overrides, with precedence call kwargs > marker > command line > ini."""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from pytest_torchcompile.common.verdict import DEFAULT_TOLERANCE, TRAINING_TOLERANCE


@dataclass(frozen=True)
class CheckOptions:
    """Everything that decides how one model is checked."""

    tol: float | None = None
    """None: ``DEFAULT_TOLERANCE``, or ``TRAINING_TOLERANCE`` for a training check."""
    backend: str = "inductor"
    mode: str | None = None
    inductor_config: dict[str, Any] = field(default_factory=dict)
    ignore_non_float: bool = False
    seed: int = 0
    dynamic: bool | None = None
    fullgraph: bool = False
    backward: bool = False
    loss_fn: Callable[[Any], Any] | None = None
    """The model's output to a scalar loss tensor, for a training check."""
    steps: int = 0
    lr: float = 0.01
    sizes: tuple[tuple[Any, ...], ...] | None = None
    intermediates: bool = True

    @property
    def training(self) -> bool:
        return self.backward or self.steps > 0

    @property
    def tolerance(self) -> float:
        return self.tolerance_for(self.training)

    def tolerance_for(self, training: bool) -> float:
        """The tolerance set, else the default for a training check or another."""
        if self.tol is not None:
            return self.tol
        return TRAINING_TOLERANCE if training else DEFAULT_TOLERANCE


@dataclass(frozen=True)
class CheckSettings(CheckOptions):
    """Per-check settings, merged from call keywords, marker, command line and ini: how to check
    (:class:`CheckOptions`) and what to do with a failure. Field names are the marker's and the
    fixture's keyword names."""

    minify: bool = True
    minify_timeout: float = 300.0
    check_str: str | None = None
    kind: str | None = None

    def check_options(self) -> CheckOptions:
        values = {f.name: getattr(self, f.name) for f in dataclasses.fields(CheckOptions)}
        if self.sizes is not None:
            values["sizes"] = tuple(tuple(size) for size in self.sizes)
        return CheckOptions(**values)

    def replace(self, overrides: Mapping[str, Any]) -> CheckSettings:
        if not overrides:
            return self
        unknown = set(overrides) - KEYWORDS
        if unknown:
            raise pytest.UsageError(
                f"unknown compile-accuracy option(s) {sorted(unknown)}; known: {sorted(KEYWORDS)}"
            )
        return dataclasses.replace(self, **overrides)


KEYWORDS = frozenset(f.name for f in dataclasses.fields(CheckSettings))


def _bool(text: str | bool) -> bool:
    if isinstance(text, bool):
        return text
    lowered = text.strip().lower()
    if lowered in ("1", "true", "yes", "on"):
        return True
    if lowered in ("0", "false", "no", "off", ""):
        return False
    raise pytest.UsageError(f"expected a boolean, got {text!r}")


def _scope(text: str) -> str:
    if text not in ("all", "marked"):
        raise pytest.UsageError(f"--compile-accuracy-scope must be 'all' or 'marked', got {text!r}")
    return text


def _mode(text: str) -> str | None:
    return None if text in ("", "default") else text


@dataclass(frozen=True)
class Option:
    """One command-line flag and its ini twin."""

    name: str
    help: str
    default: Any
    parse: Callable[[Any], Any] = str
    flag: bool = False
    negatable: bool = False
    setting: str | None = None
    metavar: str | None = None
    old_name: str | None = None
    """The name before every option took the ``compile-accuracy`` prefix: a deprecated alias on
    the command line and in the ini file, for one release."""

    @property
    def dest(self) -> str:
        return self.name.replace("-", "_")

    @property
    def cli(self) -> str:
        return f"--{self.name}"

    @property
    def old_dest(self) -> str | None:
        return None if self.old_name is None else self.old_name.replace("-", "_")


OPTIONS: tuple[Option, ...] = (
    Option(
        "compile-accuracy",
        "check models compiled with torch.compile (Inductor) against fp64 "
        "references; off, the compile_accuracy fixture only runs the model eagerly",
        False,
        _bool,
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
        setting="backend",
        metavar="NAME",
        old_name="compile-backend",
    ),
    Option(
        "compile-accuracy-mode",
        "torch.compile mode: default, reduce-overhead, max-autotune, max-autotune-no-cudagraphs",
        "default",
        _mode,
        setting="mode",
        metavar="MODE",
        old_name="compile-mode",
    ),
    Option(
        "compile-accuracy-scope",
        "which tests get their plain torch.compile calls checked graph by "
        "graph: 'all', or 'marked' (only tests marked inductor_repro)",
        "all",
        _scope,
        metavar="SCOPE",
    ),
    Option(
        "compile-accuracy-tol",
        "tolerance of the allclose shortcut and the fp64 rule's "
        f"additive slack (tol/10); default {DEFAULT_TOLERANCE:g}, {TRAINING_TOLERANCE:g} for "
        "checks of a training step (backward=True or steps)",
        None,
        float,
        setting="tol",
        metavar="TOL",
    ),
    Option(
        "compile-accuracy-intermediates",
        "also judge every floating intermediate of each "
        "compiled graph, so a deviation that later ops mask is caught (default on; "
        "--no-compile-accuracy-intermediates turns it off)",
        True,
        _bool,
        flag=True,
        negatable=True,
        setting="intermediates",
    ),
    Option(
        "compile-accuracy-minify",
        "minify every failing case into minified.py (default on; "
        "--no-compile-accuracy-minify turns it off)",
        True,
        _bool,
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
        _bool,
        flag=True,
        negatable=True,
        old_name="compile-minify-expected",
    ),
    Option(
        "compile-accuracy-minify-timeout",
        "time budget in seconds for minifying one case; the "
        "best result so far is kept, labelled not minimal",
        300.0,
        float,
        setting="minify_timeout",
        metavar="SECONDS",
        old_name="compile-minify-timeout",
    ),
    Option(
        "compile-accuracy-minify-workers",
        "with xdist: at most N processes minify at once (GPU "
        "memory); 0: every worker whose tests are done",
        0,
        int,
        metavar="N",
        old_name="compile-minify-workers",
    ),
    Option(
        "compile-accuracy-threads",
        "CPU threads for each process of the run (OpenMP, Inductor's compile "
        "workers, their child processes); default: the CPUs shared among the xdist workers, "
        "torch's defaults without xdist; 0: torch's defaults (env PYTEST_TORCHCOMPILE_THREADS)",
        None,
        metavar="N",
        old_name="compile-threads",
    ),
    Option(
        "compile-accuracy-devices",
        "CUDA devices for xdist workers: worker gwK uses entry K mod len "
        "(default: all visible; env PYTEST_TORCHCOMPILE_DEVICES); a single process uses the "
        "first",
        "",
        metavar="LIST",
        old_name="compile-devices",
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
        _bool,
        flag=True,
    ),
    Option(
        "compile-accuracy-strict",
        "with a baseline: an IMPROVED test (a recorded failure that "
        "now passes) or a row naming a test that no longer exists fails the run",
        False,
        _bool,
        flag=True,
    ),
    Option(
        "compile-accuracy-trace-log",
        "keep the DEBUG records of torch's structured-trace logger "
        "(torch.__trace: hundreds of empty lines per compile) in captured logs; without it they are "
        "dropped unless TORCH_TRACE is set",
        False,
        _bool,
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


def _given(config: pytest.Config, option: Option) -> tuple[Any, str]:
    """What the command line, else the ini file, gives for ``option`` under its name or its old
    one: the command line's value (None when not given) and the ini's text ("" when unset)."""
    value = config.getoption(option.dest)
    if value is None and option.old_dest is not None:
        value = config.getoption(option.old_dest)
    ini = config.getini(option.dest)
    if ini == "" and option.old_dest is not None:
        ini = config.getini(option.old_dest)
    return value, ini


def option_value(config: pytest.Config, option: Option) -> Any:
    """Command line over ini over default."""
    value, ini = _given(config, option)
    if value is not None:
        return value if option.flag else option.parse(value)
    return option.parse(ini) if ini != "" else option.default


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


@dataclass(frozen=True)
class GatingSettings:
    """The run-level options of CI gating and reporting."""

    baseline: Path | None
    update_baseline: bool
    strict: bool
    report: Path | None
    minify_expected: bool = True
    """Whether failures the baseline expects are minified too."""
    html: Path | None = None
    """Where the HTML report goes; None: not written."""


def gating_settings(config: pytest.Config) -> GatingSettings:
    settings = GatingSettings(
        baseline=path_value(config, option("compile-accuracy-baseline")),
        update_baseline=bool(option_value(config, option("compile-accuracy-update-baseline"))),
        strict=bool(option_value(config, option("compile-accuracy-strict"))),
        report=path_value(config, option("compile-accuracy-report")),
        minify_expected=bool(option_value(config, option("compile-accuracy-minify-expected"))),
        html=path_value(config, option("compile-accuracy-html")),
    )
    if settings.update_baseline and settings.baseline is None:
        raise pytest.UsageError(
            "--compile-accuracy-update-baseline needs --compile-accuracy-baseline PATH"
        )
    return settings


def session_settings(config: pytest.Config) -> CheckSettings:
    """The settings every check starts from: defaults < ini < command line."""
    values = {o.setting: option_value(config, o) for o in OPTIONS if o.setting is not None}
    return CheckSettings(**values)


def marker_settings(base: CheckSettings, marker: pytest.Mark | None) -> CheckSettings:
    if marker is None:
        return base
    if marker.args:
        raise pytest.UsageError(
            f"@pytest.mark.inductor_repro takes keyword arguments only ({sorted(KEYWORDS)})"
        )
    return base.replace(marker.kwargs)


MARKER_HELP = (
    "inductor_repro(tol=..., mode=..., inductor_config={...}, ignore_non_float=..., minify=..., "
    "minify_timeout=..., check_str=..., ...): per-test options of the compile-accuracy check and of "
    "repro writing/minification; overrides the command line and ini, overridden by keywords passed "
    "to the compile_accuracy fixture. Generated repro tests carry it too."
)
