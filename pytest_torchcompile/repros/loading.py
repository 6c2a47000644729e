"""Load a repro file back: import it and rebuild its case, its Inductor config undone afterwards."""

from __future__ import annotations

import hashlib
import importlib.util
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import torch
import torch.fx

from pytest_torchcompile.common.kinds import FailureKind
from pytest_torchcompile.common.verdict import DEFAULT_TOLERANCE, out_of_memory
from pytest_torchcompile.judging import judge as standalone
from pytest_torchcompile.judging.case import ReproCase
from pytest_torchcompile.judging.copies import clone_values
from pytest_torchcompile.judging.isolation.process_setup import config_patches
from pytest_torchcompile.judging.judge import ReproBroken, error_signature
from pytest_torchcompile.repros.compact import (
    compact_trace,
)
from pytest_torchcompile.repros.reading import config_lines, repro_source
from pytest_torchcompile.torch_internals.config import inductor_config, with_inductor_config_undone
from pytest_torchcompile.torch_internals.graph_compile import with_visible_outputs
from pytest_torchcompile.torch_internals.ops import OpOrigin


@dataclass
class LoadedRepro:
    path: Path
    module: ModuleType
    case: ReproCase


def load_repro(path: str | os.PathLike[str]) -> LoadedRepro:
    """Import a repro file and rebuild its case (graph traced from its ``Repro`` module)."""
    path = Path(path).resolve()
    name = f"_pytest_torchcompile_repro_{hashlib.sha1(str(path).encode()).hexdigest()[:12]}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import repro {path}")
    module, loader = importlib.util.module_from_spec(spec), spec.loader
    sys.modules[name] = module
    try:
        with_inductor_config_undone(lambda: loader.exec_module(module))
    except Exception as error:
        raise ReproBroken(
            f"the repro file does not load: {type(error).__name__}: {error}"
        ) from error
    finally:
        sys.modules.pop(name, None)
    gm, inputs = _build(module)
    title = next(
        (
            line.split(":", 1)[1].strip()
            for line in repro_source(path).splitlines()
            if line.startswith("# case:")
        ),
        path.parent.name,
    )
    # A compact file (``compact``) names only what its kind of failure needs.
    case = ReproCase(
        gm=gm,
        inputs=inputs,
        kind=_recorded_kind(module),
        title=title,
        tol=getattr(module, "TOL", DEFAULT_TOLERANCE),
        check_non_float=getattr(module, "CHECK_NON_FLOAT", True),
        non_float_failure=getattr(module, "NON_FLOAT_FAILURE", False),
        expected_error=getattr(module, "EXPECTED_ERROR", None),
        error_pattern=getattr(module, "ERROR_PATTERN", None),
        grad_enabled=getattr(module, "GRAD_ENABLED", False),
        symbolic_sizes=getattr(module, "SYMBOLIC_SIZES", []),
        config_source=config_lines(path),
        op_origins=[OpOrigin(*entry) for entry in getattr(module, "REQUIRED_OPS", [])],
        level=getattr(module, "LEVEL", standalone.POST_AOT),
    )
    return LoadedRepro(path, module, case)


def _recorded_kind(module: ModuleType) -> FailureKind:
    """The failure a loaded repro file records (its ``KIND``)."""
    try:
        return FailureKind(module.KIND)
    except (AttributeError, ValueError) as error:
        raise ReproBroken(
            f"the repro file records no failure kind: {type(error).__name__}: {error}"
        ) from error


def _build(module: ModuleType) -> tuple[torch.fx.GraphModule, list[Any]]:
    """The graph and inputs of a loaded repro file (a compact one, or one written before repros
    had ``build``)."""
    try:
        if hasattr(module, "build"):
            return module.build()
        gm = compact_trace(module)(module.Repro())
        return with_visible_outputs(
            gm, getattr(module, "VISIBLE_OUTPUTS", None)
        ), module.make_inputs()
    except Exception as error:
        reason = (
            str(error)
            if type(error).__name__ == "ReproBroken"
            else f"{type(error).__name__}: {error}"
        )
        raise ReproBroken(reason) from error


def load_case(path: str | os.PathLike[str]) -> ReproCase:
    """The case of a repro file, loaded without leaking its Inductor config into this process:
    ``load_repro`` runs the file's config lines, and this patch undoes them afterwards. Raises
    :class:`ReproBroken` when the file cannot run."""
    with inductor_config(config_patches(config_lines(Path(path)))):
        return load_repro(path).case


def repro_defect(path: str | os.PathLike[str]) -> str | None:
    """Why a just-written repro file cannot run (it does not load, or its graph fails eagerly
    on its inputs), or None. Cheap: nothing is compiled."""
    try:
        case = load_case(path)
        with torch.no_grad():
            case.gm(*clone_values(case.inputs))
    except Exception as error:
        if out_of_memory(error):
            return None  # a second copy of a large case does not fit beside the test's: no verdict
        if isinstance(error, ReproBroken):
            return str(error)
        return f"the graph fails when run eagerly on its inputs: {error_signature(error)}"
    return None
