"""A result in the wrong dtype fails with its values judged too: an int8 sum that compiled code
gives in int64 has lost its wrap-around, and its repro files judge those values, so that a fix of
the dtype alone does not read as the bug fixed."""

from __future__ import annotations

import subprocess
import sys
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
from torch.fx.experimental.proxy_tensor import make_fx

from pytest_torchcompile.common.kinds import FailureKind
from pytest_torchcompile.common.leaves import LeafResult
from pytest_torchcompile.common.verdict import Comparison
from pytest_torchcompile.judging.case import ReproCase
from pytest_torchcompile.judging.judge import judge_graph
from pytest_torchcompile.judging.tensor_comparison import compare_tensor
from pytest_torchcompile.minifying.repro_file import minify_repro
from pytest_torchcompile.repros.loading import load_case
from pytest_torchcompile.repros.repro import write_repro

WIDENED_ADD = """
import torch
from torch._inductor import lowering

aten = torch.ops.aten
_add = lowering.lowerings[aten.add.Tensor]


def _widened_add(a, b, **kwargs):
    # int8 added in int64: the wrap-around is lost, and the result is int64
    if a.get_dtype() == torch.int8:
        a, b = lowering.to_dtype(a, torch.int64), lowering.to_dtype(b, torch.int64)
    return _add(a, b, **kwargs)


lowering.lowerings[aten.add.Tensor] = _widened_add
"""

ADD_AS_SUB = """
import torch
from torch._inductor import lowering

aten = torch.ops.aten
# the dtype right, the values wrong
lowering.lowerings[aten.add.Tensor] = lowering.lowerings[aten.sub.Tensor]
"""


EXOTIC = [
    torch.float32,
    torch.float16,
    torch.bfloat16,
    torch.float8_e4m3fn,
    torch.float8_e5m2,
    torch.float8_e8m0fnu,
    torch.complex64,
    torch.int64,
    torch.int8,
    torch.uint8,
    torch.bool,
]


@pytest.mark.parametrize("expected", EXOTIC, ids=str)
def test_a_wrong_dtype_fails_whatever_the_two_dtypes_are(expected: torch.dtype) -> None:
    """Torch promotes no float8 dtype (a float8 result against an int raised), and a complex
    result cast to a real dtype warns: a wrong dtype fails as ``metadata``, its values judged,
    never the plugin's error."""
    values = torch.linspace(0.5, 3, 16)
    eager = values.to(expected)
    reference = eager.to(torch.complex128) if eager.is_complex() else eager.double()
    for compiled in EXOTIC:
        if compiled == expected:
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            leaf = compare_tensor("out", values.to(compiled), eager, reference, 1e-4)
        assert (leaf.passed, leaf.rule) == (False, "metadata"), (compiled, leaf)
        assert leaf.detail.startswith(
            f"compiled gave (16,) {compiled}, eager (16,) {expected}; as "
        )


def test_a_wrong_integer_dtype_shows_the_values_that_differ() -> None:
    leaf = compare_tensor(
        "out",
        torch.tensor([200, 3]),
        torch.tensor([-56, 3], dtype=torch.int8),
        None,
        1e-4,
        check_non_float=False,
    )
    assert (leaf.passed, leaf.rule, leaf.dtype) == (False, "metadata", "int8")
    assert (leaf.max_abs_error, leaf.max_error_index) == (256.0, (0,))
    assert leaf.detail == (
        "compiled gave (2,) torch.int64, eager (2,) torch.int8; "
        "as int64 the values differ (1 of 2 elements differ)"
    )


def test_values_that_fit_the_expected_dtype_are_judged_in_it() -> None:
    leaf = compare_tensor(
        "out", torch.tensor([-56, 3]), torch.tensor([-56, 3], dtype=torch.int8), None, 1e-4
    )
    assert not leaf.passed
    assert leaf.detail.endswith("; as int8 the values match")


def test_a_floating_result_in_another_precision_is_judged_by_the_rule_in_eagers() -> None:
    eager = torch.randn(100, generator=torch.Generator().manual_seed(0)).half()
    leaf = compare_tensor("out", eager.float() * 1.1, eager, eager.double() * 1.0001, 1e-4)
    assert not leaf.passed and leaf.ratio is not None and leaf.ratio > 3
    assert leaf.detail.endswith("; as float16 the values differ (fp64 rmse)")


def test_a_wrong_integer_dtype_is_a_failure_in_non_floating_outputs() -> None:
    wrong = LeafResult("out[0]", (4,), "int8", False, "metadata")
    floating = LeafResult("out[1]", (4,), "float32", False, "metadata")
    assert Comparison([wrong]).fails_only_in_non_float
    assert not Comparison([wrong, floating]).fails_only_in_non_float


def doubled_tripled(x: torch.Tensor) -> tuple[torch.Tensor]:
    return ((x + x) * 3,)


def run_under(mutant: Path, repro: Path) -> subprocess.CompletedProcess[str]:
    """``repro`` run by hand in a process whose Inductor has ``mutant`` installed."""
    code = f"import runpy; exec(open({str(mutant)!r}).read()); runpy.run_path({str(repro)!r}, run_name='__main__')"
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)


@pytest.mark.slow  # a minification and three repro runs; its lighter twins are the tests above
def test_every_file_judges_the_values_behind_a_wrong_dtype(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from torch._inductor import lowering

    x = torch.tensor([100, 3, -70, 5], dtype=torch.int8)
    widened, values_wrong = tmp_path / "widened.py", tmp_path / "add_as_sub.py"
    widened.write_text(WIDENED_ADD)
    values_wrong.write_text(ADD_AS_SUB)
    installed: dict[str, Any] = {}
    exec(WIDENED_ADD, installed)
    add: Callable[..., Any] = installed["_widened_add"]
    monkeypatch.setitem(lowering.lowerings, torch.ops.aten.add.Tensor, add)
    gm = make_fx(doubled_tripled)(x)
    verdict = judge_graph(gm, [x], 1e-4, False)
    assert verdict.failure == FailureKind.ACCURACY
    case = ReproCase(
        gm,
        [x],
        FailureKind.ACCURACY,
        "doubled_tripled",
        non_float_failure=Comparison(verdict.leaves).fails_only_in_non_float,
    )
    repro = write_repro(case, tmp_path / "repro.py")
    minify_repro(repro, isolate=False, find_stage=False)
    minified = tmp_path / "minified.py"
    assert load_case(minified).check_non_float

    shown = run_under(widened, repro)
    assert shown.returncode == 1, shown.stdout + shown.stderr
    assert "as int64 the values differ (2 of 4 elements differ from eager's" in shown.stdout
    compact = run_under(widened, minified)
    assert (
        compact.returncode == 1 and "metadata (compiled (4,) torch.int64) FAIL" in compact.stdout
    ), compact.stdout
    for path in (repro, minified):  # a fix that restores the dtype and leaves the values wrong
        fixed_dtype = run_under(values_wrong, path)
        assert fixed_dtype.returncode == 1, path.name + fixed_dtype.stdout + fixed_dtype.stderr
