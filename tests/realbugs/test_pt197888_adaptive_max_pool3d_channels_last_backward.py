"""pytorch/pytorch#197888: adaptive_max_pool3d_backward and fractional_max_pool{2,3}d_backward
read a non-contiguous indices tensor as if it were contiguous: silently wrong gradients, reached
from torch.compile with channels_last_3d inputs.

The compiled forward saves the pooling indices in the input's channels-last layout; the eager
backward kernel the backward graph calls reads them as contiguous and scatters the gradient to
the wrong positions. Forward values are right.

Reproduces: torch 2.13.0 CPU, 2.14.1 (CPU). Fixed: 2.15.0.
Measured (2.13.0, CPU): input gradient max abs error 3 (values are 0/1/2 counts), RMSE against
fp64 0.46 where eager's is 0.
"""

import pytest
import torch
import torch.nn.functional as F

pytestmark = pytest.mark.realbug(issue=197888, fixed_in="2.15.0")


class Pool(torch.nn.Module):
    def forward(self, x):
        return F.adaptive_max_pool3d(x, (2, 3, 5))


def volume():
    values = torch.randperm(4 * 4 * 6 * 10, generator=torch.Generator().manual_seed(0)).float()
    return values.reshape(1, 4, 4, 6, 10).contiguous(memory_format=torch.channels_last_3d)


def test_fixture(compile_accuracy):
    x = volume().requires_grad_()
    out = compile_accuracy(Pool(), x, backward=True)
    assert out.shape == (1, 4, 2, 3, 5)


def test_plain():
    x = volume().requires_grad_()
    torch.compile(Pool())(x).sum().backward()
    assert x.grad.shape == x.shape
