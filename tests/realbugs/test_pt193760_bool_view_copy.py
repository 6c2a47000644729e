"""pytorch/pytorch#193760: [inductor][cuda]
`view(torch.bool).copy_(y.view(torch.bool)).view(torch.float32)` silently corrupts data under
`torch.compile`.

A byte-wise copy through a ``torch.bool`` view: eager copies the raw bytes, Inductor's Triton
kernel loads and stores them as booleans, so every byte becomes 0x01 (each float32 element
2.37e-38). Other 1-byte dtypes (uint8, int8) are copied correctly. The view back uses
``x.dtype`` so that the fp64 reference run stays a bitwise copy.

Reproduces: reported on 2.13/2.14 (L4) as a silent wrong result. On torch 2.11 CUDA (H100,
Triton 3.6) the same graph fails to compile instead (``LoweringException: TypeError:
torch.bool is not supported by torch.iinfo``), which the plugin catches as a compile failure.
Fixed: not as of the thread (open; fix proposed in pytorch/pytorch#197405).
Measured (2.11, H100): a compile failure, as above.
"""

import pytest
import torch

pytestmark = [
    pytest.mark.realbug(issue=193760),
    pytest.mark.cuda,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA"),
]


def copy_bytes(x, y):
    return x.view(torch.bool).copy_(y.view(torch.bool)).view(x.dtype)


def inputs():
    g = torch.Generator().manual_seed(1234)
    return (torch.randn(8, 8, generator=g) * 10).cuda(), (
        torch.randn(8, 8, generator=g) * 10
    ).cuda()


def test_fixture(compile_accuracy):
    out = compile_accuracy(copy_bytes, *inputs())
    assert out.shape == (8, 8)


def test_plain():
    x, y = inputs()
    out = torch.compile(copy_bytes)(x, y)
    assert out.shape == (8, 8)
