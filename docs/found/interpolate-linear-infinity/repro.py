"""torch.compile: linear, bilinear and trilinear interpolate give NaN where an input is infinite.

Only torch needed. Exit 1 while the bug reproduces, 0 once fixed.
"""

import sys

import torch
import torch.nn.functional as F

CASES = {
    "linear": (
        lambda x: F.interpolate(x, size=7, mode="linear"),
        torch.tensor([[[float("inf"), 1.0, 2.0, -float("inf")]]]),
    ),
    "bilinear": (
        lambda x: F.interpolate(x, scale_factor=2, mode="bilinear"),
        torch.tensor([[[[float("inf"), 1.0], [2.0, 3.0]]]]),
    ),
    "trilinear": (
        lambda x: F.interpolate(x, size=(2, 4, 4), mode="trilinear"),
        torch.tensor([[[[[float("inf"), 1.0], [2.0, 3.0]]]]]),
    ),
}

print(torch.__version__)
wrong = 0
for name, (f, x) in CASES.items():
    torch._dynamo.reset()
    eager, compiled, fp64 = f(x), torch.compile(f)(x), f(x.double())
    # Where eager and the fp64 run agree on an infinity, compiled code must give it too.
    expected = eager.isinf() & (eager.double() == fp64)
    bad = int((expected & (compiled != eager)).sum())
    wrong += bad
    print(f"{name}: of {int(expected.sum())} infinities that eager and fp64 give, compiled code "
          f"gives {bad} otherwise ({int((expected & compiled.isnan()).sum())} NaN)")
sys.exit(1 if wrong else 0)
