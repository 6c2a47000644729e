"""The text of a ready-to-file PyTorch issue for a case directory: a title, the versions, the
minified code, what was expected and what came instead, and the stage of the stack at fault.
Written beside ``minified.py`` as ``bug_report.md`` and printed by ``python -m
pytest_torchcompile report``."""

from __future__ import annotations

import contextlib
import re
from pathlib import Path

from pytest_torchcompile.common.files import MINIFIED_NAME
from pytest_torchcompile.common.kinds import FailureKind
from pytest_torchcompile.common.verdict import Status
from pytest_torchcompile.repros.reading import (
    NotARepro,
    config_lines,
    graph_source,
    header_fields,
    repro_source,
)


def bug_report(repro: Path, outcome: str = "", ops: list[str] | None = None) -> str:
    """The report of the case of the repro file ``repro``: of the ``minified.py`` beside it
    where there is one.

    ``outcome`` is what the compiled graph gave against the reference (the per-output table, or
    the error), as the minifier last judged it; ``ops`` the distinct ops of the graph. Raises
    :class:`NotARepro` where ``repro`` is no repro, :class:`ReproBroken` where the file shown
    cannot be read."""
    original, minified = header_fields(repro), repro.with_name(MINIFIED_NAME)
    shown, fields = repro, original
    # A minified.py that is missing or no repro (a pipe, a planted file) is neither shown nor read
    # past its header.
    with contextlib.suppress(NotARepro):
        shown, fields = minified, header_fields(minified)
    kind = _kind(original["status"])
    source = repro_source(shown)
    compact = not source.startswith("# pytest-torchcompile repro:")
    env = fields.get("env", "")
    # Where the graph's inputs live (a GPU host's environment names its GPU for CPU cases too).
    device = "CUDA" if re.search(r"'cuda(:\d+)?'", source) else "CPU"
    culprit = ", ".join(ops) if ops else f"a {fields['ops']}-op graph"
    title = (
        f"[inductor] wrong result from {culprit} on {device}"
        if kind == FailureKind.ACCURACY
        else f"[inductor] {culprit} on {device}: {kind.replace('_', ' ')}"
    )
    lines = [
        f"# {title}",
        "",
        "### Describe the bug",
        "",
        f"`torch.compile` (Inductor) {_what(kind)} for {culprit} on {device}, found by "
        f"pytest-torchcompile in `{original['case']}`"
        + (
            f" and minified from {original['ops']} ops to {fields['ops']}."
            if shown == minified
            else " (not minified)."
        ),
        *([f"Where: {fields['stage']}."] if "stage" in fields else []),
        "",
        "### Expected vs got",
        "",
        _expected(kind),
        *(["", "```", outcome.strip(), "```"] if outcome.strip() else []),
        "",
        "### Repro",
        "",
    ]
    lines += _compact_repro(repro, shown, source) if compact else _full_repro(shown)
    lines += ["", "### Versions", "", env or "unknown", ""]
    return "\n".join(lines)


def _compact_repro(repro: Path, shown: Path, source: str) -> list[str]:
    """The Repro section of a compact file's report: the whole file, which reads on its own."""
    return [
        f"`python {shown.name}` exits 1 while the bug reproduces, 0 once fixed (only torch "
        "needed"
        + (
            "; its larger inputs are in `tensors/` beside it"
            if (repro.parent / "tensors").is_dir() and "_load('" in source
            else ""
        )
        + "):",
        "",
        "```python",
        source.strip(),
        "```",
    ]


def _full_repro(shown: Path) -> list[str]:
    """The Repro section of a full repro's report: its graph and the Inductor config it needs,
    the whole file attached."""
    config = config_lines(shown)
    return [
        "The graph (the whole repro is attached: "
        f"`python {shown.name}` exits 1 while the bug reproduces, 0 once fixed):",
        "",
        "```python",
        graph_source(shown) or f"# see {shown.name}",
        "```",
        *(
            [
                "",
                "Inductor config that differs from the defaults:",
                "",
                "```python",
                config,
                "```",
            ]
            if config
            else []
        ),
    ]


def _kind(status: str) -> str:
    """The kind of failure a header's status names: a check's status (``fail_accuracy: ...``) or
    a case's kind (``accuracy (minified 9 -> 1 ops)``)."""
    token = status.split(":")[0].split()[0] if status.strip() else "failure"
    kind = Status(token).failure_kind if token in set(Status) else None
    return str(kind) if kind is not None else token


def _what(kind: str) -> str:
    if kind == FailureKind.ACCURACY:
        return "computes a wrong result"
    if kind == FailureKind.COMPILE_ERROR:
        return "fails to compile a graph that runs eagerly"
    if kind == FailureKind.RUNTIME_ERROR:
        return "compiles code that raises at run time, where eager runs"
    return f"fails ({kind})"


def _expected(kind: str) -> str:
    if kind == FailureKind.ACCURACY:
        return (
            "Expected: the compiled graph is as close to an fp64 run of the same graph as eager is "
            "(PyTorch's `same()` rule: rmse(compiled, fp64) <= multiplier x rmse(eager, fp64)). "
            "Got, per output (rmse columns; ratio = rmse(compiled, fp64) / rmse(eager, fp64)):"
        )
    return "Expected: the compiled graph runs as eager does. Got:"
