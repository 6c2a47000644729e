"""Inductor's adaptive_max_pool2d (and adaptive_max_pool1d, which lowers to it) returns, for a
window holding a NaN after its largest finite value, that finite value's index where eager
returns the NaN's; the value is NaN in both. A training step then sends the window's gradient to
the finite element. Exit 1 while the bug reproduces, 0 once fixed. Only torch needed.
``python repro.py cuda`` runs it on a GPU."""

import math
import sys

import torch
import torch.nn.functional as F

nan = math.nan


def pool1d(x):
    return F.adaptive_max_pool1d(x, 2, return_indices=True)


def pool2d(x):
    return F.adaptive_max_pool2d(x, 2, return_indices=True)


def main(device: str) -> int:
    wrong = 0
    x = torch.tensor([[-3.0, 0.5, nan]], device=device)  # windows [-3, 0.5] and [0.5, nan]
    for name, fn, value in (
        ("adaptive_max_pool1d", pool1d, x),
        (
            "adaptive_max_pool2d",
            pool2d,
            torch.tensor([[[-3.0, 0.5, nan], [0.25, 1.0, -1.0], [2.0, nan, 0.0]]], device=device),
        ),
    ):
        for dtype in (torch.float32, torch.float64, torch.bfloat16, torch.float16):
            eager = fn(value.to(dtype))
            torch._dynamo.reset()
            compiled = torch.compile(fn)(value.to(dtype))
            same = torch.equal(eager[1], compiled[1])
            wrong += not same
            print(
                f"{name} {str(dtype)[6:]}: indices eager {eager[1].flatten().tolist()}, "
                f"compiled {compiled[1].flatten().tolist()}{'' if same else '  WRONG'}"
            )
    leaf = x.clone().requires_grad_()
    F.adaptive_max_pool1d(leaf, 2).sum().backward()
    compiled_leaf = x.clone().requires_grad_()
    torch._dynamo.reset()
    torch.compile(lambda t: F.adaptive_max_pool1d(t, 2))(compiled_leaf).sum().backward()
    same = torch.equal(leaf.grad, compiled_leaf.grad)
    wrong += not same
    print(
        f"gradient: eager {leaf.grad.tolist()}, compiled {compiled_leaf.grad.tolist()}"
        f"{'' if same else '  WRONG'}"
    )
    print("REPRODUCED" if wrong else "PASS: the bug is fixed")
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "cpu"))
