"""A relu miscompiled at layer 61 of a 100-layer tanh MLP: later layers wash its error out of the
output (torch's own end-to-end check sees nothing at its tolerance), and the intermediates probe
catches it. In process, but long: 100 layers compiled twice."""

from __future__ import annotations

import pytest
import torch

from pytest_torchcompile.checking.model import check_model
from pytest_torchcompile.common.settings import CheckOptions
from pytest_torchcompile.common.verdict import Status

RELU_BUG = {"cpp.inject_relu_bug_TESTING_ONLY": "accuracy"}


class DeepTanhMLP(torch.nn.Module):
    """The anchor workload's MLP (benchmarks/anchor_model.py): relu instead of tanh at one layer."""

    def __init__(self, layers: int = 100, relu_at: int = 61) -> None:
        super().__init__()
        self.relu_at = relu_at
        self.layers = torch.nn.ModuleList(torch.nn.Linear(32, 32) for _ in range(layers))
        self.norm = torch.nn.LayerNorm(32)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for index, layer in enumerate(self.layers):
            x = layer(x)
            x = torch.relu(x) if index == self.relu_at else torch.tanh(x)
            x = x * 0.5 + x.sin()
        return self.norm(x).softmax(-1)


@pytest.mark.slow  # 100 layers compiled twice; unit/checking/test_training_dynamic.py's
# test_masked_deviation_is_caught_by_intermediate_checks_only is its twin in the default run
def test_relu_bug_at_layer_61_of_100_is_masked_at_the_output_but_caught_inside() -> None:
    torch.manual_seed(0)
    model = DeepTanhMLP().eval()
    x = torch.randn(16, 32)
    # At torch's own repro tolerance the end-to-end check sees nothing, as torch's does.
    options = CheckOptions(inductor_config=RELU_BUG, tol=1e-3, intermediates=False)
    with torch.no_grad():
        assert check_model(model, (x,), options=options).status is Status.PASS
        outcome = check_model(model, (x,), options=CheckOptions(inductor_config=RELU_BUG, tol=1e-3))
    assert outcome.status is Status.FAIL_ACCURACY
    assert "intermediate 'relu' deviates" in outcome.message
