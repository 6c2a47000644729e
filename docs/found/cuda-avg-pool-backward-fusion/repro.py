"""Inductor on CUDA: a fused avg_pool2d_backward + mul + sum kernel returns wrong values.

Ten ops of the backward graph of timm's eca_nfnet_l0 (fp32 training), as pytest-torchcompile
minified them, here with random inputs. Exit 1 while the bug reproduces, 0 once fixed; only
torch needed. Every variant below ran on one NVIDIA H200, torch 2.11.0+cu130, Triton 3.6.0.
"""

import sys

import torch
from torch._inductor.utils import run_and_get_code

torch.backends.cudnn.allow_tf32 = False
aten = torch.ops.aten


def f(conv, pool_self, g58, g60, m412, a60, expand, ceil_mode=True, count_include_pad=False, use_pool=True):
    p = aten.avg_pool2d_backward(g60, pool_self, [2, 2], [2, 2], [0, 0], ceil_mode, count_include_pad, None) if use_pool else g60.repeat_interleave(2, 2).repeat_interleave(2, 3)
    m = (g58 + p) * 0.9622504486493761 * m412 * a60 * 0.2 * 2.0
    return m * expand, (m * conv).sum([2, 3], keepdim=True)


def inputs(dev, dtype=torch.float32, contiguous_expand=False, n=4, c=512, h=28):
    g = torch.Generator().manual_seed(0)
    r = lambda *s: torch.randn(*s, generator=g, dtype=torch.float64).to(dev, dtype)
    conv = r(n, c, h, h)
    e = r(n, c, 1, 1).expand(n, c, h, h)
    return [conv, r(n, c, h, h), conv, r(n, c, h // 2, h // 2), r(n, c, h, h), r(n, c, h, h), e.contiguous() if contiguous_expand else e]


def check(name, dev="cuda", cfg={}, dump=False, **kw):
    shape = {k: kw.pop(k) for k in ("n", "c", "h") if k in kw}
    ce = kw.pop("contiguous_expand", False)
    xs = inputs(dev, contiguous_expand=ce, **shape)
    ref = f(*[x.double() for x in xs], **kw)
    eag = f(*xs, **kw)
    torch._dynamo.reset()
    with torch._inductor.config.patch(**cfg):
        fn = torch.compile(lambda *a: f(*a, **kw))
        (out, code) = run_and_get_code(fn, *xs)
    wrong = 0
    for i in range(2):
        e_e = (eag[i].double() - ref[i]).pow(2).mean().sqrt().item()
        e_c = (out[i].double() - ref[i]).pow(2).mean().sqrt().item()
        bad = (out[i].double() - ref[i]).abs().gt(1e-3 * ref[i].abs().max()).sum().item()
        wrong += bad
        print(f"{name:42s} out[{i}] rmse eager {e_e:.2e} compiled {e_c:.2e} ratio {e_c / max(e_e, 1e-30):9.1f} wrong elements {bad}")
    if dump:
        open(sys.argv[1], "w").write("\n\n".join(code))
    return wrong


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.argv.append("output_code.py")
    print(torch.__version__, torch.cuda.get_device_name())
    reproduced = check("as minified (random inputs)", dump=True) > 0
    check("ceil_mode=False", ceil_mode=False)
    check("count_include_pad=True", count_include_pad=True)
    check("ceil_mode=False, count_include_pad=True", ceil_mode=False, count_include_pad=True)
    check("no avg_pool2d_backward", use_pool=False)
    check("expand made contiguous", contiguous_expand=True)
    check("max_fusion_size=1", cfg={"max_fusion_size": 1})
    check("persistent_reductions=False", cfg={"triton.persistent_reductions": False})
    check("split_reductions=False", cfg={"split_reductions": False})
    check("comprehensive_padding=False", cfg={"comprehensive_padding": False})
    check("batch 1", n=1)
    check("channels 64", c=64)
    check("28 -> 8", h=8)
    check("cpu (C++)", dev="cpu")
    sys.exit(int(reproduced))
