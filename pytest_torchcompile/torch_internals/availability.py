"""Which of the plugin's features the installed torch leaves off, and the internal each misses.

Each concern module says what internal its feature needs and the installed torch lacks (a
``..._missing`` function); the feature itself then does without it rather than raise. This
module names those features for the run's summary and the JSON report."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from pytest_torchcompile.torch_internals.bisector import (
    config_changes_missing,
    graph_pass_switch_missing,
    subsystem_switch_missing,
)
from pytest_torchcompile.torch_internals.compiling import (
    first_missing_attribute,
    vector_isa_probe_missing,
)
from pytest_torchcompile.torch_internals.config import (
    default_test_missing,
    defaults_missing,
    overrides_missing,
    types_missing,
)
from pytest_torchcompile.torch_internals.decomposed import decomposed_missing
from pytest_torchcompile.torch_internals.fingerprint import lowering_tables_missing
from pytest_torchcompile.torch_internals.interception import interception_missing
from pytest_torchcompile.torch_internals.ops import op_registry_missing
from pytest_torchcompile.torch_internals.random_ops import random_tag_missing
from pytest_torchcompile.torch_internals.threads import compile_workers_missing
from pytest_torchcompile.torch_internals.values import out_arguments_missing, symbolic_hint_missing


@dataclass(frozen=True)
class FeatureOff:
    """A feature the installed torch leaves off."""

    feature: str
    internal: str
    """The torch internal it needs and this torch lacks."""
    instead: str
    """What the plugin does without it."""

    @property
    def line(self) -> str:
        return f"{self.feature} is off: torch {torch.__version__} has no {self.internal}; {self.instead}"

    def to_dict(self) -> dict[str, str]:
        return {"feature": self.feature, "internal": self.internal, "instead": self.instead}


@dataclass(frozen=True)
class _Feature:
    feature: str
    instead: str
    missing: Callable[[], str | None]


_FEATURES = (
    _Feature(
        "checking plain torch.compile calls",
        "the graphs of watched tests are not judged (the fixture's checks are)",
        interception_missing,
    ),
    _Feature(
        "the user's Inductor config for graphs that draw no random numbers",
        "they compile under the random-op config (fallback_random) too",
        overrides_missing,
    ),
    _Feature(
        "finding a failure's stage by switching Inductor passes and lowerings off",
        "the stage is looked for by config alone",
        subsystem_switch_missing,
    ),
    _Feature(
        "finding a failure's stage by switching named Inductor graph passes off",
        "a pass outside the compiler bisector's subsystems is not named",
        graph_pass_switch_missing,
    ),
    _Feature(
        "finding a failure's stage by setting config values back to their defaults",
        "those steps are not tried",
        defaults_missing,
    ),
    _Feature(
        "finding a failure's stage by the compiler bisector's config changes",
        "those steps are not tried",
        config_changes_missing,
    ),
    _Feature(
        "comparing the lowering tables of a test process and its judging children",
        "lowerings registered at run time go unnoticed",
        lowering_tables_missing,
    ),
    _Feature(
        "naming the module that registers an op outside aten in a repro",
        "a repro of such an op may need its import added by hand",
        op_registry_missing,
    ),
    _Feature(
        "probing the CPU's vector ISAs ahead of a judging child's first compile",
        "that compile probes them, later",
        vector_isa_probe_missing,
    ),
    _Feature(
        "the non-default Inductor config in the JSON report", "it is left out", default_test_missing
    ),
    _Feature(
        "checking the type of each inductor_config value a marker or the fixture gives",
        "a value of another type is left to the compile",
        types_missing,
    ),
    _Feature(
        "telling graphs that draw random numbers",
        "none is taken for one: no random op is seeded alike "
        "for eager and compiled runs, nor compiled under fallback_random",
        random_tag_missing,
    ),
    _Feature(
        "the sizes symbolic inputs had when traced", "1 is taken for each", symbolic_hint_missing
    ),
    _Feature(
        "telling an out= overload of an allocating op by its schema",
        "it is told by its overload's name",
        out_arguments_missing,
    ),
    _Feature(
        "keeping the logs of Inductor's compile workers in the plugin's compiles out of a "
        "test's logs",
        "a test's captured logs may hold those records (filelock's DEBUG records of a C++ build)",
        compile_workers_missing,
    ),
    _Feature(
        "the decomposed graph run eagerly as a floor of a failing check",
        "a failing check is measured against eager and its reordered runs only",
        decomposed_missing,
    ),
)


_CORE = (
    ("torch._inductor.compile_fx", "compile_fx"),
    ("torch._inductor.compile_fx", "compile_fx_inner"),
    ("torch._inductor", "list_mode_options"),
    ("torch._inductor.config", "patch"),
    ("torch._inductor.config", "get_config_copy"),
    ("torch._inductor.config", "load_config"),
    ("torch._inductor.config", "codegen_config"),
    ("torch._inductor.config", "fallback_random"),
    ("torch._functorch.config", "enable_autograd_cache"),
    ("torch.utils._python_dispatch", "TorchDispatchMode"),
)
"""What checking itself uses (compiling with Inductor, capturing its graphs, the fp64 reference)."""


def core_missing() -> str | None:
    """The first internal checking itself needs that the installed torch lacks (the compiler is
    imported for the answer); None where it has them all."""
    # The fixture's capture passes compile_fx an inner_compile too.
    return first_missing_attribute(_CORE) or interception_missing()


def features_off() -> list[FeatureOff]:
    """The features the installed torch leaves off (the compiler is imported for the answer)."""
    off = []
    for feature in _FEATURES:
        try:
            missing = feature.missing()
        except Exception as error:  # the probe's own internals are gone
            missing = f"what it needs ({type(error).__name__}: {error})"
        if missing is not None:
            off.append(FeatureOff(feature.feature, missing, feature.instead))
    return off
