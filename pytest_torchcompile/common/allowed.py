"""What a setting takes (:class:`Allowed` and its kinds) and the one-line usage error for a value
it does not take; with what the installed torch knows handed in, the checks of compiler names and
Inductor config values that only torch can answer."""

from __future__ import annotations

import difflib
import importlib.machinery
import importlib.util
import math
import numbers
import os
import re
import sys
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from pytest_torchcompile.common.devices import parse_devices


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
        number = self._number(given)
        if not self._within(number):
            raise NotAllowed
        return number

    def _number(self, given: Any) -> int | float:
        """``given`` as a finite number, an integer where ``whole``; :class:`NotAllowed` where it
        is none (a bool included)."""
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
        return number

    def _within(self, number: int | float) -> bool:
        """Whether ``number`` is within the bounds ``least`` (with ``above``) and ``most``."""
        if self.least is not None and (
            number < self.least or (self.above and number == self.least)
        ):
            return False
        return self.most is None or number <= self.most


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
