"""A small model suite as a model repository would write it, checked with
``pytest examples --compile-accuracy``.

One model is deliberately miscompiled: its marker switches on Inductor's own testing knob that
makes generated code compute relu wrongly, so the demo shows a real failing case, its standalone
repro and its minified repro.
"""

import pytest
import torch

INJECT_RELU_BUG = {
    "cpp.inject_relu_bug_TESTING_ONLY": "accuracy",
    "triton.inject_relu_bug_TESTING_ONLY": "accuracy",
}


class MLP(torch.nn.Module):
    def __init__(self, layers: int = 6, width: int = 32) -> None:
        super().__init__()
        self.layers = torch.nn.ModuleList(torch.nn.Linear(width, width) for _ in range(layers))
        self.norm = torch.nn.LayerNorm(width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for index, layer in enumerate(self.layers):
            x = layer(x)
            x = torch.relu(x) if index == 3 else torch.tanh(x)
            x = x * 0.5 + x.sin()
        return self.norm(x).softmax(-1)


class ConvBlock(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.bn = torch.nn.BatchNorm2d(8)

    def forward(self, x: torch.Tensor) -> dict[str, torch.Tensor]:
        features = torch.nn.functional.gelu(self.bn(self.conv(x)))
        return {"features": features, "pooled": features.mean((2, 3)), "mask": features > 0}


@pytest.fixture
def device() -> str:
    return "cuda" if torch.cuda.is_available() else "cpu"


def test_mlp(compile_accuracy, device):
    torch.manual_seed(0)
    model = MLP().eval().to(device)
    out = compile_accuracy(model, torch.randn(16, 32, device=device))
    assert out.shape == (16, 32)


def test_conv_block(compile_accuracy, device):
    torch.manual_seed(0)
    model = ConvBlock().eval().to(device)
    out = compile_accuracy(model, torch.randn(2, 3, 16, 16, device=device))
    assert set(out) == {"features", "pooled", "mask"}


@pytest.mark.inductor_repro(inductor_config=INJECT_RELU_BUG)
def test_mlp_miscompiled(compile_accuracy, device):
    torch.manual_seed(0)
    model = MLP().eval().to(device)
    compile_accuracy(model, torch.randn(16, 32, device=device))
