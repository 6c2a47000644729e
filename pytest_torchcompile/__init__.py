"""pytest-torchcompile: checks torch.compile (Inductor) against an fp64 reference in a test
suite, and turns each miscompilation into a standalone, minified repro.

The public face is what ``__all__`` names: the ``compile_accuracy`` fixture's type, the settings
a check takes, the statuses it gives, and hypothesis strategies for model inputs
(``pytest_torchcompile.strategies``, imported on first use: it needs torch, which a run that
checks nothing does not import). The pytest plugin is ``pytest_torchcompile.plugin`` (entry point
``torchcompile``); the command line tool is ``python -m pytest_torchcompile``. Everything else is
internal; ``docs/architecture.md`` maps it.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from pytest_torchcompile.common.settings import CheckOptions, CheckSettings
from pytest_torchcompile.common.verdict import Status
from pytest_torchcompile.fixture import CompileAccuracy

__all__ = ["CheckOptions", "CheckSettings", "CompileAccuracy", "Status", "strategies"]


def __getattr__(name: str) -> ModuleType:
    if name == "strategies":
        return importlib.import_module(f"{__name__}.strategies")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
