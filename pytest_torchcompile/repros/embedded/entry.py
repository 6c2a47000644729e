"""What a full repro file runs: ``python repro.py`` (its exit status says what it saw) and
``pytest repro.py`` (one test, marked ``inductor_repro``)."""

import sys
from typing import TYPE_CHECKING, Any

import torch
import torch.fx

from pytest_torchcompile.common.kinds import FailureKind
from pytest_torchcompile.common.leaves import shown_table
from pytest_torchcompile.judging.judge import (
    BROKEN_EXIT,
    FAILS_DIFFERENTLY_EXIT,
    FIXED_EXIT,
    REPRODUCED_EXIT,
    ReproBroken,
    judge_graph,
    same_failure,
)
from pytest_torchcompile.judging.registration import register_ops
from pytest_torchcompile.repros.embedded.tracing import _trace
from pytest_torchcompile.torch_internals.graph_compile import with_visible_outputs

if TYPE_CHECKING:
    from pytest_torchcompile.repros.embedded.declared import (
        CHECK_NON_FLOAT,
        ERROR_PATTERN,
        EXPECTED_ERROR,
        GRAD_ENABLED,
        KIND,
        LEVEL,
        REQUIRED_OPS,
        SKIPPED_CONFIG,
        TOL,
        VISIBLE_OUTPUTS,
        Repro,
        make_inputs,
    )

BROKEN = register_ops(REQUIRED_OPS)


def build() -> tuple[torch.fx.GraphModule, list[Any]]:
    """The graph and its inputs; raises ReproBroken when the repro cannot run."""
    if BROKEN is not None:
        raise ReproBroken(BROKEN)
    try:
        return with_visible_outputs(_trace(Repro()), VISIBLE_OUTPUTS), make_inputs()
    except Exception as error:
        raise ReproBroken(f"the graph cannot be built: {type(error).__name__}: {error}") from error


def run_check() -> tuple[int, str]:
    """Compile and judge the graph; return (exit status, report)."""
    torch.manual_seed(0)
    try:
        graph, inputs = build()
    except ReproBroken as error:
        return BROKEN_EXIT, f"REPRO BROKEN: {error}"
    with torch.set_grad_enabled(GRAD_ENABLED):
        verdict = judge_graph(graph, inputs, TOL, CHECK_NON_FLOAT, level=LEVEL)
    if verdict.failure == FailureKind.EAGER_ERROR:
        return (
            BROKEN_EXIT,
            f"REPRO BROKEN: the graph fails eagerly on its own inputs: {verdict.error}",
        )
    lines = [f"expected failure: {KIND}" + (f" ({EXPECTED_ERROR})" if EXPECTED_ERROR else "")]
    if SKIPPED_CONFIG:
        lines.append(
            f"note: Inductor config keys this torch ({torch.__version__}) lacks were skipped: "
            f"{', '.join(SKIPPED_CONFIG)}"
        )
    if verdict.leaves:
        lines.append(shown_table(verdict.leaves))
    if verdict.failure is None:
        lines.append("PASS: the compiled graph matches the reference: the bug is fixed")
        return FIXED_EXIT, "\n".join(lines)
    lines.append(f"{verdict.failure}" + (f": {verdict.error}" if verdict.error else ""))
    if same_failure(verdict, KIND, EXPECTED_ERROR, ERROR_PATTERN):
        lines.append("REPRODUCED")
        return REPRODUCED_EXIT, "\n".join(lines)
    lines.append("FAILS DIFFERENTLY from the recorded failure")
    return FAILS_DIFFERENTLY_EXIT, "\n".join(lines)


def main() -> int:
    status, report = run_check()
    print(report)
    return status


try:
    import pytest
except ImportError:  # the file runs with torch alone
    pytest = None  # type: ignore[assignment]

if pytest is not None:

    @pytest.mark.inductor_repro(kind=KIND, tol=TOL)
    def test_repro() -> None:
        status, report = run_check()
        assert status == FIXED_EXIT, report


if __name__ == "__main__":
    sys.exit(main())
