from math import inf, nan

import torch
from pytest_torchcompile.strategies import filled

def program(x0, x1):
    v0 = x0.to(torch.float64)
    v1 = torch.nn.functional.adaptive_max_pool1d(x1[None], 2)[0]
    v2 = x0.index_add(0, torch.tensor([2]), x0.narrow(0, 0, 1))
    v3 = torch.argsort(v2, dim=0, descending=False, stable=True)
    v4 = torch.erf(x0)
    v5 = v2 % -3
    return (v0, v1, v3, v4, v5,)

x0 = torch.tensor([-2.974609375, 7.62939453125e-06, nan], dtype=torch.float16)
x1 = torch.tensor([-2.974609375, 2.781342323134e-309, nan], dtype=torch.float64)
program(x0, x1)  # check with {'backward': True}
