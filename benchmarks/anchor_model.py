"""Anchor workload: an MLP of LAYERS layers (default 12) whose compiled graph carries one injected
relu accuracy bug (torch's own testing knob, ``cpp``/``triton.inject_relu_bug_TESTING_ONLY``).

Run as a script, ``python benchmarks/anchor_model.py cpu|cuda [LAYERS] [BUG_AT]``, it compiles the
model with torch's accuracy minifier on (``TORCHDYNAMO_REPRO_AFTER=aot``, repro level 4), which
detects the deviation and writes torch's ``minifier_launcher.py``: the side-by-side reference for
this project's minifier. The benchmarks (``minify_vs_torch.py``, ``end_to_end.py``) read only the
class ``M`` from this file, with ``LAYERS`` and ``BUG_AT`` of their own; ``parallel_minify.py``
writes the same model into its suite. Reference figures: docs/performance.md, "The anchor
workload".
"""

import sys
import time

import torch
import torch._dynamo.config as dynamo_config
import torch._inductor.config as inductor_config

DEVICE = sys.argv[1] if len(sys.argv) > 1 else "cpu"
LAYERS = int(sys.argv[2]) if len(sys.argv) > 2 else 12
BUG_AT = int(sys.argv[3]) if len(sys.argv) > 3 else 7


class M(torch.nn.Module):
    def __init__(self, n=LAYERS):
        super().__init__()
        self.layers = torch.nn.ModuleList(torch.nn.Linear(32, 32) for _ in range(n))
        self.norm = torch.nn.LayerNorm(32)

    def forward(self, x):
        for i, layer in enumerate(self.layers):
            x = layer(x)
            x = torch.tanh(x) if i != BUG_AT else torch.relu(x)
            x = x * 0.5 + x.sin()
        return self.norm(x).softmax(-1)


def main() -> None:
    """Compile the model under torch's accuracy minifier; print whether it detected the bug."""
    if DEVICE == "cuda":
        inductor_config.triton.inject_relu_bug_TESTING_ONLY = "accuracy"
    else:
        inductor_config.cpp.inject_relu_bug_TESTING_ONLY = "accuracy"
    dynamo_config.repro_after = "aot"
    dynamo_config.repro_level = 4
    torch.manual_seed(0)
    model = M().eval().to(DEVICE)
    x = torch.randn(16, 32, device=DEVICE)
    started = time.time()
    with torch.no_grad():
        try:
            torch.compile(model)(x)
            print("NO FAILURE DETECTED")
        except Exception as error:
            print("detected:", type(error).__name__)
    print(f"detect_s {time.time() - started:.2f}")


if __name__ == "__main__":
    main()
