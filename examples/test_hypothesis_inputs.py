"""Property-based inputs: hypothesis draws shapes, dtypes and layouts; every example is checked,
compiled code is reused across examples (dynamic shapes), and a failure is shrunk to a small input
before its repro is written."""

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_torchcompile.strategies import tensors

model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.Linear(16, 4)).eval()


@settings(max_examples=10, deadline=None)
@given(x=tensors(shape=st.tuples(st.integers(1, 32), st.just(8)), layout="any"))
def test_mlp_any_batch_and_layout(compile_accuracy, x):
    out = compile_accuracy(model, x, dynamic=True)
    assert out.shape == (x.shape[0], 4)
