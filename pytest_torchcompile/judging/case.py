"""A case to judge: one graph, its real inputs, and the failure it is expected to show. What a
repro file holds, what the minifier reduces, and what a judging child is sent."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch
import torch.fx

from pytest_torchcompile.common import verdict
from pytest_torchcompile.common.kinds import FailureKind
from pytest_torchcompile.judging import judge as standalone
from pytest_torchcompile.judging.capture import op_count
from pytest_torchcompile.torch_internals.ops import OpOrigin, op_origins


@dataclass
class ReproCase:
    """Everything a repro file holds."""

    gm: torch.fx.GraphModule
    inputs: list[Any]
    kind: FailureKind
    title: str
    tol: float = verdict.DEFAULT_TOLERANCE
    check_non_float: bool = True
    non_float_failure: bool = False
    """The recorded failure is in non-floating outputs only (an integer or bool output is wrong,
    no floating one): the minifier then judges them too, as the repro does."""
    expected_error: str | None = None
    error_pattern: str | None = None
    config_source: str = ""
    grad_enabled: bool = False
    symbolic_sizes: list[list[str] | None] = field(default_factory=list)
    status_line: str = ""
    notes: list[str] = field(default_factory=list)
    generated_code: str = ""
    """What Inductor generated for the graph (a minified one's), appended as comments to read."""
    level: str = standalone.POST_AOT
    """``standalone.POST_AOT``: ``gm`` is what Inductor lowered (aten ops); ``standalone.DYNAMO``:
    what Dynamo captured (torch-level ops), compiled through AOT autograd, the decompositions and
    Inductor; see ``stages`` too."""
    stage: str = ""
    """Which stage of the stack introduces the failure (a minified case's), in words."""
    op_origins: list[OpOrigin] = field(default_factory=list)
    """Where ops of the graph come from, as an earlier repro file recorded them: a process that
    loads the file may not know where a module it imported by path came from."""

    def required_ops(self) -> list[OpOrigin]:
        known = {origin.qualname: origin for origin in self.op_origins}
        return [
            known.get(origin.qualname, origin) if origin.module is None else origin
            for origin in op_origins(self.gm)
        ]

    @property
    def op_count(self) -> int:
        return op_count(self.gm)
