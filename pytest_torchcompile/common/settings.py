"""The plugin's options: one table drives the command line, the ini file, the marker and the
fixture's keyword overrides, with precedence call kwargs > marker > command line > ini.

Each option and keyword says what it takes (:class:`Allowed`); a value it does not take stops
the run at its start (the command line, the ini file, the environment) or fails the test that
gives it (a marker's or the fixture's keyword), with one line naming the setting, the value and
what it takes."""

from __future__ import annotations

import argparse
import dataclasses
import difflib
import importlib.machinery
import importlib.util
import math
import numbers
import os
import re
import sys
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from pytest_torchcompile.common.devices import DEVICES_ENV, parse_devices
from pytest_torchcompile.common.leaves import FULL_TABLE_VARIABLE
from pytest_torchcompile.common.verdict import DEFAULT_TOLERANCE, TRAINING_TOLERANCE

MARKER = "@pytest.mark.inductor_repro"
FIXTURE = "compile_accuracy"
"""The sources of a check's settings besides the run's, as messages name them."""


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

    def check_options(self) -> CheckOptions:
        values = {f.name: getattr(self, f.name) for f in dataclasses.fields(CheckOptions)}
        if self.sizes is not None:
            values["sizes"] = tuple(tuple(size) for size in self.sizes)
        return CheckOptions(**values)

    def replace(
        self,
        overrides: Mapping[str, Any],
        source: str = FIXTURE,
        compiler_names: CompilerNames | None = None,
        config_has: ConfigHas | None = None,
        config_refusal: ConfigRefusal | None = None,
    ) -> CheckSettings:
        """These settings with ``overrides``, keywords that ``source`` (the marker, the fixture)
        gave: a usage error for an unknown one or a value it does not take; with
        ``compiler_names``, also for a backend or mode the installed torch does not know, with
        ``config_has``, for an Inductor config name it does not know, and with
        ``config_refusal``, for an Inductor config value not of the type torch declares."""
        if not overrides:
            return self
        unknown = set(overrides) - KEYWORDS
        if unknown:
            raise pytest.UsageError(
                f"{source}: unknown compile-accuracy option(s) {sorted(unknown)}; "
                f"known: {sorted(KEYWORDS)}"
            )
        values = {
            name: checked(KEYWORD_ALLOWED[name], given, f"{source}({name}=...)")
            for name, given in overrides.items()
        }
        if compiler_names is not None:
            for name, value in values.items():
                check_compiler_name(
                    KEYWORD_ALLOWED[name], value, f"{source}({name}=...)", compiler_names
                )
        if config_has is not None and "inductor_config" in values:
            check_config(values["inductor_config"], source, config_has, config_refusal)
        return dataclasses.replace(self, **values)


KEYWORDS = frozenset(f.name for f in dataclasses.fields(CheckSettings))


class NotAllowed(ValueError):
    """A value a setting does not take."""


@dataclass(frozen=True)
class Allowed:
    """What a setting takes. Called with the text of the command line, the ini file or the
    environment, or with a marker's or the fixture's value, it returns the setting's value, or
    raises :class:`NotAllowed`; ``describe`` says what it takes."""

    describe: str

    def __call__(self, given: Any) -> Any:
        raise NotImplementedError


@dataclass(frozen=True)
class Flag(Allowed):
    """A bool, or where ``text``, words for one (``yes``, ``off``, ...): the command line, the ini
    file and the environment give text; a marker's or the fixture's keyword takes a bool alone:
    text there is Python's, where ``"no"`` is true."""

    describe: str = "true or false"
    text: bool = True

    def __call__(self, given: Any) -> bool:
        if isinstance(given, bool):
            return given
        lowered = given.strip().lower() if isinstance(given, str) and self.text else None
        if lowered in ("1", "true", "yes", "on"):
            return True
        if lowered in ("0", "false", "no", "off", ""):
            return False
        raise NotAllowed


@dataclass(frozen=True)
class Number(Allowed):
    """A finite number (an integer where ``whole``), at least ``least`` (more than it where
    ``above``; any where ``least`` is None) and at most ``most`` (where given); None too where
    ``optional``."""

    describe: str = ""
    least: float | None = 0
    above: bool = False
    whole: bool = False
    optional: bool = False
    most: float | None = None

    def __post_init__(self) -> None:
        if not self.describe:
            kind = "an integer" if self.whole else "a finite number"
            lower = "" if self.least is None else f"{'>' if self.above else '>='} {self.least:g}"
            upper = "" if self.most is None else f"<= {self.most:g}"
            bounds = " and ".join(bound for bound in (lower, upper) if bound)
            object.__setattr__(self, "describe", f"{kind} {bounds}".rstrip())

    def __call__(self, given: Any) -> int | float | None:
        if given is None and self.optional:
            return None
        if isinstance(given, bool):
            raise NotAllowed
        number: int | float
        try:
            if isinstance(given, (str, numbers.Integral)) and self.whole:
                number = int(given)
            elif isinstance(given, (str, numbers.Real)) and not self.whole:
                number = float(given)
            else:
                raise NotAllowed
        except (ValueError, OverflowError):  # OverflowError: an integer beyond every float
            raise NotAllowed from None
        # Only a float can be infinite (math.isfinite cannot take an integer beyond every float).
        if isinstance(number, float) and not math.isfinite(number):
            raise NotAllowed
        if self.least is not None and (
            number < self.least or (self.above and number == self.least)
        ):
            raise NotAllowed
        if self.most is not None and number > self.most:
            raise NotAllowed
        return number


@dataclass(frozen=True)
class Choice(Allowed):
    describe: str = ""
    choices: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not self.describe:
            listed = ", ".join(repr(choice) for choice in self.choices)
            object.__setattr__(self, "describe", f"one of {listed}")

    def __call__(self, given: Any) -> str:
        if not isinstance(given, str) or given not in self.choices:
            raise NotAllowed
        return given


@dataclass(frozen=True)
class OfType(Allowed):
    """A value of one of ``types``."""

    types: tuple[type, ...] = (str,)

    def __call__(self, given: Any) -> Any:
        if not isinstance(given, self.types):
            raise NotAllowed
        return given


@dataclass(frozen=True)
class Devices(Allowed):
    """CUDA device indices; where ``visible`` (the devices this machine shows) is given, each
    below it."""

    describe: str = "CUDA device indices, like '0,2'"
    visible: int | None = None

    def __post_init__(self) -> None:
        if self.visible == 0:
            object.__setattr__(self, "describe", "no CUDA device index: none is visible")
        elif self.visible is not None:
            object.__setattr__(
                self, "describe", f"CUDA device indices below {self.visible}, the devices visible"
            )

    def __call__(self, given: Any) -> tuple[int, ...]:
        if not isinstance(given, str):
            raise NotAllowed
        try:
            devices = tuple(parse_devices(given))
        except ValueError:
            raise NotAllowed from None
        if self.visible is not None and any(index >= self.visible for index in devices):
            raise NotAllowed
        return devices


@dataclass(frozen=True)
class InputSets(Allowed):
    """None, or a list (or tuple) of argument lists (or tuples): the arguments of each further
    call of a check."""

    def __call__(self, given: Any) -> Any:
        if given is not None and (
            not isinstance(given, (list, tuple))
            or not all(isinstance(arguments, (list, tuple)) for arguments in given)
        ):
            raise NotAllowed
        return given


@dataclass(frozen=True)
class Pattern(Allowed):
    """None, or a regular expression that compiles."""

    describe: str = "a regular expression or None"

    def __call__(self, given: Any) -> Any:
        if given is None:
            return None
        if not isinstance(given, str):
            raise NotAllowed
        try:
            re.compile(given)
        except re.error:
            raise NotAllowed from None
        return given


SETUP_ENV = "PYTEST_TORCHCOMPILE_SETUP"
"""Modules (``package.module``) or files (``path/to/setup.py``), comma-separated, that a judging
process imports before it judges anything: custom backends, op registrations, Inductor passes
or lowerings that the process which found the failure had and a fresh process lacks."""


def setup_entries(text: str) -> tuple[str, ...]:
    """The modules and files of :data:`SETUP_ENV`'s text, blank entries left out."""
    return tuple(filter(None, (part.strip() for part in text.split(","))))


def is_setup_file(entry: str) -> bool:
    """Whether an entry of :data:`SETUP_ENV` names a file rather than a module."""
    return entry.endswith(".py") or os.sep in entry


@dataclass(frozen=True)
class SetupModules(Allowed):
    """:data:`SETUP_ENV`'s entries: each module one the import system finds, each file one that
    exists. Nothing is imported to tell: an import at the run's start would run the module's
    code in the tests' process, which a plain run does not; the judging processes import them."""

    describe: str = (
        "comma-separated modules that can be imported (package.module) or files that exist "
        "(path/to/setup.py)"
    )

    def __call__(self, given: Any) -> tuple[str, ...]:
        if not isinstance(given, str):
            raise NotAllowed
        entries = setup_entries(given)
        for entry in entries:
            if is_setup_file(entry):
                if not Path(entry).is_file():
                    raise NotAllowed(f"no file {entry}")
            elif not _findable(entry):
                raise NotAllowed(f"no module {entry} can be found")
        return entries


def _findable(name: str) -> bool:
    """Whether the import system finds module ``name`` (dotted) with nothing imported."""
    parts = name.split(".")
    return all(part.isidentifier() for part in parts) and (
        name in sys.modules or _spec(name) is not None
    )


def _spec(name: str) -> importlib.machinery.ModuleSpec | None:
    """Module ``name``'s spec: a top-level one, or one under a package imported already, from the
    import system's finders (which import nothing then); one under a package not imported, from
    the package's directories."""
    package = name.rpartition(".")[0]
    if not package or package in sys.modules:
        try:
            return importlib.util.find_spec(name)
        except (ImportError, ValueError):
            return None
    parent = _spec(package)
    if parent is None or parent.submodule_search_locations is None:
        return None
    return importlib.machinery.PathFinder.find_spec(name, list(parent.submodule_search_locations))


@dataclass(frozen=True)
class ConfigPatches(Allowed):
    """Inductor config values by dotted name: a dict with a name for every key. Here only its
    form is checked, as this module imports no torch: whether the installed torch's config has
    each name, and takes each value's type, is :func:`check_config`'s to say."""

    describe: str = "a dict of Inductor config values by dotted name"

    def __call__(self, given: Any) -> dict[str, Any]:
        if not isinstance(given, dict) or not all(
            isinstance(name, str) and name.strip() for name in given
        ):
            raise NotAllowed
        return given


@dataclass(frozen=True)
class CompilerName(Allowed):
    """A name that ``torch.compile`` takes for its keyword ``keyword`` (or, where
    ``callable_too``, a callable). The text in ``default`` names torch's default, read as None.
    Here only its form is checked, as this module imports no torch: whether the installed torch
    knows the name is :func:`check_compiler_name`'s to say."""

    keyword: str = ""
    listed_by: str = ""
    """Which torch call lists the names."""
    callable_too: bool = False
    default: tuple[str, ...] = ()

    def __call__(self, given: Any) -> Any:
        if (given is None and self.default) or (self.callable_too and callable(given)):
            return given
        if given in self.default:
            return None
        if not isinstance(given, str) or not given.strip():
            raise NotAllowed
        return given


CompilerNames = Callable[[str], Collection[str]]
"""The names the installed ``torch.compile`` takes for a keyword (``backend``, ``mode``)."""
ConfigHas = Callable[[str], bool]
"""Whether the installed torch's Inductor config has a value of that dotted name."""
ConfigRefusal = Callable[[str, Any], str | None]
"""What the installed torch's Inductor config value of that dotted name takes, where the value
given is not of it; None where it is, or where torch does not say."""


def checked(allowed: Allowed, given: Any, where: str) -> Any:
    """``allowed(given)``, or a usage error in one line: the setting (``where``), the value, the
    part of it refused where :class:`NotAllowed` names one, and what it takes."""
    try:
        return allowed(given)
    except NotAllowed as error:
        raise pytest.UsageError(refused(where, given, allowed.describe, str(error))) from None


def refused(where: str, given: Any, expected: str, why: str = "") -> str:
    because = f" ({why})" if why else ""
    return f"{where}: {given!r} is not allowed{because}; expected {expected}"


def check_compiler_name(
    allowed: Allowed, value: Any, where: str, compiler_names: CompilerNames
) -> None:
    """A usage error where ``value``, of a setting that ``allowed`` says is a compiler name, is
    a name the installed torch does not know; torch is asked only for a name given."""
    if not isinstance(allowed, CompilerName) or not isinstance(value, str):
        return
    known = sorted(compiler_names(allowed.keyword))
    if value in known:
        return
    close = difflib.get_close_matches(value, known, n=3)
    if len(known) <= 8:
        listed = f": {', '.join(known)}"
    else:
        listed = f" ({allowed.listed_by})" + (f"; close: {', '.join(close)}" if close else "")
    raise pytest.UsageError(refused(where, value, f"{allowed.describe} this torch knows{listed}"))


def check_config(
    patches: Mapping[str, Any],
    source: str,
    config_has: ConfigHas,
    config_refusal: ConfigRefusal | None = None,
) -> None:
    """A usage error for the first name of ``patches`` (an ``inductor_config`` that ``source``
    gave) that the installed torch's Inductor config does not have, or, with
    ``config_refusal``, whose value is not of the type it declares."""
    for name, value in patches.items():
        if not config_has(name):
            raise pytest.UsageError(
                refused(
                    f"{source}(inductor_config=...)",
                    name,
                    "a dotted name in this torch's Inductor config",
                )
            )
        takes = None if config_refusal is None else config_refusal(name, value)
        if takes is not None:
            raise pytest.UsageError(refused(config_where(source, name), value, takes))


def config_where(source: str, name: str) -> str:
    """How a message names the value of Inductor config ``name`` that ``source`` gave."""
    return f"{source}(inductor_config={{{name!r}: ...}})"


def refused_config_value(patches: Mapping[str, Any], error: str) -> str | None:
    """The name of the value of ``patches`` that a compile's ``error`` names, name and value
    together, as Inductor's refusal of a value it does not take does (``unrecognized config
    cpp.inject_relu_bug_TESTING_ONLY = 'acuracy'``): the setting's fault, not the model's. None
    where it names none."""
    return next(
        (
            name
            for name, value in patches.items()
            if name in error
            and (repr(value) in error or (isinstance(value, str) and value and value in error))
        ),
        None,
    )


class ConfigValueRefused(Exception):
    """A compile raised on a value of a check's ``inductor_config`` (:func:`refused_config_value`):
    a usage error of the setting, which the code that knows the setting's source says."""

    def __init__(self, name: str, value: Any, error: str) -> None:
        super().__init__(name, value, error)
        self.name, self.value, self.error = name, value, error

    def line(self, source: str) -> str:
        """The usage error in one line, naming the value as ``source`` gave it."""
        return refused(
            config_where(source, self.name),
            self.value,
            "a value this torch's Inductor takes for it",
            f"compiling raised {self.error}",
        )


@dataclass(frozen=True)
class Option:
    """One command-line flag and its ini twin."""

    name: str
    help: str
    default: Any
    allowed: Allowed = OfType("text")
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
KEYWORD_FLAG = Flag("True or False", text=False)
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
MOST_STEPS = 1000
"""The most SGD steps of a training check (``steps=``): every run of the check (eager twice,
compiled, fp64) takes each step, so the count multiplies the check's time (1000 steps of a
two-layer MLP take seconds; ``steps=10**400`` would hold the run for good)."""

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


REPRO_KIND = "kind"
"""The marker's keyword that names the failure kind a generated repro test's file records (its
``KIND``), for the session to read the test's result by. No setting: the marker of any other
test cannot give it."""


def marker_settings(
    base: CheckSettings,
    marker: pytest.Mark | None,
    compiler_names: CompilerNames | None = None,
    config_has: ConfigHas | None = None,
    repro_test: bool = False,
    config_refusal: ConfigRefusal | None = None,
) -> CheckSettings:
    """``base`` with the marker's keywords; ``repro_test``: the marker is a generated repro
    test's, whose :data:`REPRO_KIND` is no setting."""
    if marker is None:
        return base
    if marker.args:
        raise pytest.UsageError(f"{MARKER} takes keyword arguments only ({sorted(KEYWORDS)})")
    given = {
        name: value
        for name, value in marker.kwargs.items()
        if not (repro_test and name == REPRO_KIND)
    }
    return base.replace(given, MARKER, compiler_names, config_has, config_refusal)


KEYWORD_ALLOWED: dict[str, Allowed] = {
    **{
        option.setting: KEYWORD_FLAG if isinstance(option.allowed, Flag) else option.allowed
        for option in OPTIONS
        if option.setting is not None
    },
    "inductor_config": ConfigPatches(),
    "ignore_non_float": KEYWORD_FLAG,
    "seed": Number(
        "an integer from -2**63 to 2**64-1, as torch.manual_seed takes",
        least=-(2**63),
        whole=True,
        most=2**64 - 1,
    ),
    "dynamic": OfType("True, False or None", (bool, type(None))),
    "fullgraph": KEYWORD_FLAG,
    "backward": KEYWORD_FLAG,
    "loss_fn": OfType("a function or None", (Callable, type(None))),  # type: ignore[arg-type]
    "steps": Number(whole=True, most=MOST_STEPS),
    "lr": Number(),
    "sizes": InputSets("a list of argument tuples, one per extra call, like [(x[:3],)], or None"),
    "check_str": Pattern(),
}
"""What each keyword of the marker and the fixture takes: its option's, where it has one (a bool
alone where the option takes words for one too)."""


MARKER_HELP = (
    "inductor_repro(tol=..., mode=..., inductor_config={...}, ignore_non_float=..., minify=..., "
    "minify_timeout=..., check_str=..., ...): per-test options of the compile-accuracy check and of "
    "repro writing/minification; overrides the command line and ini, overridden by keywords passed "
    "to the compile_accuracy fixture. Generated repro tests carry it too."
)
