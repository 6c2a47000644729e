"""The settings of a check and of the run: what decides how one model is checked
(:class:`CheckOptions`), with what to do with a failure (:class:`CheckSettings`), merged with
precedence call kwargs > marker > command line > ini, and the run's gating and reporting
(:class:`GatingSettings`); the keywords the marker and the fixture take, and what each takes.

A value a keyword does not take fails the test that gives it, with one line naming the setting,
the value and what it takes; a value an option does not take stops the run at its start
(``options``)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from pytest_torchcompile.common.allowed import (
    Allowed,
    CompilerNames,
    ConfigHas,
    ConfigPatches,
    ConfigRefusal,
    Flag,
    InputSets,
    Number,
    OfType,
    Pattern,
    check_compiler_name,
    check_config,
    checked,
)
from pytest_torchcompile.common.options import OPTIONS, option, option_value, path_value
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


KEYWORD_FLAG = Flag("True or False", text=False)

MOST_STEPS = 1000
"""The most SGD steps of a training check (``steps=``): every run of the check (eager twice,
compiled, fp64) takes each step, so the count multiplies the check's time (1000 steps of a
two-layer MLP take seconds; ``steps=10**400`` would hold the run for good)."""


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
