"""A plain ``torch.compile`` training step whose backward is wrong only after the compiled forward
(it misreads a tensor the forward saved in Inductor's layout) fails its test under
``--compile-accuracy``, with a torch-level repro that reproduces on its own."""

from __future__ import annotations

import subprocess
import sys

import pytest

pytest_plugins = ["pytester"]

SUITE = """
import torch

# Tagged flexible_layout: Inductor hands the ops its own layout of a tensor, as it does to aten's
# fallback kernels. The backward reads w as channels-last, as eager's cat of channels-last
# tensors lays it out; Inductor saves its cat contiguous.
@torch.library.custom_op("pt_training_run::scale_by", mutates_args=(), tags=(torch.Tag.flexible_layout,))
def scale_by(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return x * w


@scale_by.register_fake
def _(x, w):
    return torch.empty_like(x)


@torch.library.custom_op("pt_training_run::scale_by_backward", mutates_args=(), tags=(torch.Tag.flexible_layout,))
def scale_by_backward(grad: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return grad * torch.as_strided(w, w.shape, w.contiguous(memory_format=torch.channels_last).stride())


@scale_by_backward.register_fake
def _(grad, w):
    return torch.empty_like(grad)


def save_weight(ctx, inputs, output):
    ctx.save_for_backward(inputs[1])


def scale_by_grad(ctx, grad):
    (w,) = ctx.saved_tensors
    return scale_by_backward(grad, w), None


scale_by.register_autograd(scale_by_grad, setup_context=save_weight)


def test_train_step():
    torch.manual_seed(0)
    x = torch.randn(2, 6, 5, 7, requires_grad=True)
    v = torch.randn(2, 3, 5, 7).contiguous(memory_format=torch.channels_last)
    torch.compile(lambda x, v: scale_by(x, torch.cat([v, v], 1)))(x, v).sum().backward()
    assert x.grad.shape == x.shape
"""


def test_a_backward_wrong_only_after_the_compiled_forward_fails_its_test(
    pytester: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("COLUMNS", "200")  # the whole table, and lines unwrapped
    pytester.makepyfile(test_training=SUITE)
    result = pytester.runpytest(
        "--compile-accuracy", "--no-compile-minify", "-p", "no:cacheprovider"
    )
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "fail_accuracy: 1 of 1 gradients of torch-level graph 0 from*",
            "grad of L_x_ *fp64 rmse FAIL*",
        ]
    )
    (repro,) = (pytester.path / ".compile-accuracy").glob("*/repro.py")
    assert "# level:   torch-level graph" in repro.read_text()
    run = subprocess.run(
        [sys.executable, str(repro)], capture_output=True, text=True, timeout=300, cwd=repro.parent
    )
    assert run.returncode == 1 and "REPRODUCED" in run.stdout, run.stdout + run.stderr
