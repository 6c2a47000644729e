"""A plain ``torch.compile`` call on inputs whose values or sizes a record cannot hold (meta
tensors, a nested tensor's jagged sizes) runs as compiled, its graph listed as not judged with the
reason; recording it crashed the test's own call inside the capture ("Cannot copy out of meta
tensor", "'NestedIntNode' object has no attribute 'int_'")."""

from __future__ import annotations

import torch

from pytest_torchcompile.checking.plain import GraphChecker
from pytest_torchcompile.common.verdict import DEFAULT_TOLERANCE
from pytest_torchcompile.torch_internals.compiling import reset


def doubled_sine(x: torch.Tensor) -> torch.Tensor:
    return x.sin() * 2


def test_a_call_on_meta_tensors_runs_and_is_not_judged() -> None:
    checker = GraphChecker(DEFAULT_TOLERANCE, check_non_float=True, intermediates=True)
    with checker.watching():
        out = torch.compile(doubled_sine)(torch.ones(4, device="meta"))
    reset()
    assert out.device.type == "meta" and out.shape == (4,)
    assert checker.tally.failures == [] and not checker.tally.judged
    assert [line.split(": ", 1)[1] for line in checker.tally.unchecked] == [
        "not judged: its inputs are meta tensors, which hold no values to judge"
    ]


def test_a_call_on_a_jagged_nested_tensor_runs_and_is_not_judged() -> None:
    parts = [torch.linspace(0, 1, 6).reshape(2, 3), torch.linspace(1, 2, 12).reshape(4, 3)]
    nested = torch.nested.nested_tensor(parts, layout=torch.jagged)
    checker = GraphChecker(DEFAULT_TOLERANCE, check_non_float=True, intermediates=True)
    with checker.watching():
        out = torch.compile(doubled_sine)(nested)
    reset()
    assert all(
        torch.allclose(got, doubled_sine(part))
        for got, part in zip(out.unbind(), parts, strict=True)
    )
    assert checker.tally.failures == [] and not checker.tally.judged
    assert [line.split(": ", 1)[1] for line in checker.tally.unchecked] == [
        "not judged: its inputs have jagged sizes (a nested tensor's), which have no int value"
    ]
