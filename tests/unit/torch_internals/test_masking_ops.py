"""Which ops can hide a deviation of what they read: the masked-deviation probe runs only on
graphs that hold one."""

from __future__ import annotations

import pytest
import torch

from pytest_torchcompile.torch_internals.ops import can_mask_a_deviation

aten = torch.ops.aten
x = torch.randn(4, 6)


@pytest.mark.parametrize(
    ("target", "inputs"),
    [
        (aten.relu.default, [x]),
        (aten.where.self, [x > 0, x, x]),
        (aten.amax.default, [x]),
        (aten.tanh.default, [x]),
        (aten.var_mean.correction, [x]),
        (aten.slice.Tensor, [x]),
        (aten.gt.Scalar, [x]),
        (aten._to_copy.default, [x]),
        (aten.index_put.default, [x]),
        (aten.div.Tensor_mode, [x, x]),
    ],
)
def test_ops_that_select_saturate_normalise_drop_or_narrow_can_mask(
    target: object, inputs: list[object]
) -> None:
    results = {
        aten.slice.Tensor: x[:, 1:3],
        aten.gt.Scalar: x > 0,
        aten._to_copy.default: x.bfloat16(),
        aten.amax.default: x.amax(0),
        aten.var_mean.correction: torch.var_mean(x, 0),
    }
    assert can_mask_a_deviation(target, inputs, results.get(target, x))


@pytest.mark.parametrize(
    ("target", "inputs", "result"),
    [
        (aten.add.Tensor, [x, x], x),
        (aten.mul.Tensor, [x, x], x),
        (aten.exp.default, [x], x),
        (aten.mm.default, [x, x.t()], x @ x.t()),
        (aten.sum.dim_IntList, [x], x.sum(1)),
        (
            aten.convolution.default,
            [x.view(1, 1, 4, 6), torch.ones(1, 1, 3, 3)],
            torch.ones(1, 1, 2, 4),
        ),
        (aten.slice.Tensor, [x], x[:, :]),
        (aten._to_copy.default, [x], x.double()),
        (aten.relu.default, [torch.arange(4)], torch.arange(4)),
        (aten._fft_r2c.default, [x], torch.fft.rfft(x)),
    ],
)
def test_ops_that_carry_every_deviation_to_their_result_cannot(
    target: object, inputs: list[object], result: object
) -> None:
    assert not can_mask_a_deviation(target, inputs, result)
