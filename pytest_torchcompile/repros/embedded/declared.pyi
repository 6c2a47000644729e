# The names ``repros.repro.render_repro`` writes into every full repro file, between the embedded
# modules: declared here for the type checker, which the embedded code imports them from under
# TYPE_CHECKING. In a file they are the file's own (a test holds each name written).
from typing import Any

import torch

KIND: str
TOL: float
CHECK_NON_FLOAT: bool
NON_FLOAT_FAILURE: bool
EXPECTED_ERROR: str | None
ERROR_PATTERN: str | None
GRAD_ENABLED: bool
SYMBOLIC_SIZES: list[list[str]]
REQUIRED_OPS: list[tuple[str, str | None, str | None]]
LEVEL: str
VISIBLE_OUTPUTS: list[int] | None
INDUCTOR_CONFIG: str
SKIPPED_CONFIG: list[str]

class Repro(torch.nn.Module): ...

def make_inputs() -> list[Any]: ...
