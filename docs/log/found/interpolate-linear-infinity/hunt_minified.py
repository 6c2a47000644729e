# case:    program_1187 :: torch-level graph 0 from venv/lib/python3.11/site-packages/hypothesis/core.py:1001 (test)
# status:  accuracy (minified 1 -> 1 ops)
# ops:     1
# stage:   deviation appears with AOT autograd alone (aot_eager)
# env:     torch 2.15.0+cu132, python 3.11.7, cpu x86_64, triton 3.9.0
import copy, math, os, sys, torch._inductor.compile_fx  # with it torch._inductor.config
import torch._functorch.config
sys.excepthook = lambda *error: (sys.__excepthook__(*error), os._exit(3))  # exit 3: the repro cannot run

torch._inductor.config.cpp.threads = 2

class Repro(torch.nn.Module):
    def forward(self, l_x0_):
        interpolate = torch.nn.functional.interpolate(l_x0_, size = 2, scale_factor = None, mode = 'linear', align_corners = True, recompute_scale_factor = None, antialias = False);  l_x0_ = None
        return (interpolate,)

def make_inputs():
    return [
        _load([[[float('inf'), 1.3408203125], [0.0, float('nan')]], [[-float('inf'), 0.5732421875], [-0.92236328125, -1.4140625]], [[1.25390625, float('inf')], [0.0, 2.310546875]]], torch.float32, (3, 2, 2), (4, 2, 1), 'cpu'),
    ]
KIND, TOL, CHECK_NON_FLOAT, WRITTEN_INPUTS = 'accuracy', 0.0001, False, []
# --- only torch needed: the fp64 rule of pytest-torchcompile (PyTorch's same()), eager, fp64 and Inductor ---
def leaf_verdict(compiled: torch.Tensor, eager: torch.Tensor, reference: torch.Tensor | None, tol: float,
                 check_non_float: bool = True) -> tuple[bool, str, tuple[float, ...]]:
    if not compiled.is_floating_point():  # where eager's value is not fp64's (it rounded a float it compared), compiled may give fp64's
        return (bool(((compiled == eager) | (compiled == (eager if reference is None else reference.to(compiled.dtype)))).all()), "exact", ()) if check_non_float else (True, "not checked (non-floating)", ())
    if compiled.numel() == 0:
        return True, "empty", ()
    # Compiled code's NaNs and infinities may differ from eager's where they are fp64's (eager overflowed): no failure.
    patterns = [torch.stack([t.isnan(), t == math.inf, t == -math.inf]) for t in (compiled, eager, reference) if t is not None]
    if bool((differs := (patterns[0] != patterns[1]).any(0)).any()) and not (reference is not None and torch.equal(patterns[0][:, differs], patterns[2][:, differs])
            and torch.allclose(reference.to(compiled.dtype)[differs], compiled[differs], atol=4e-2, rtol=4e-2, equal_nan=True)):
        return False, "non-finite pattern", ()
    if torch.allclose(compiled, eager, atol=tol, rtol=tol, equal_nan=True):
        return True, "allclose", ()
    finite = compiled.isfinite() & eager.isfinite()
    if reference is None:
        cosine = float(torch.nn.functional.cosine_similarity(
            compiled[finite].double().flatten(), eager[finite].double().flatten(), dim=0, eps=1e-6))
        return cosine >= 0.99, "cosine vs eager (no fp64 reference)", (cosine,)
    finite &= reference.isfinite()  # none finite in all three: no error (their NaNs and infinities are fp64's)
    errors = [float(torch.sqrt(torch.sum(torch.square(reference[finite].double() - value[finite].double())) / max(int(finite.sum()), 1)))
              for value in (compiled, eager)]
    small = eager.numel() < 1000 or (eager.dim() == 4 and eager.shape[-1] == eager.shape[-2] == 1) or tol >= 2e-2
    multiplier = 3.0 if eager.dtype in (torch.float16, torch.bfloat16) or small else 2.0
    return errors[0] <= multiplier * errors[1] + tol / 10.0, "fp64 rmse", (*errors, multiplier)
def _laid_out(values: torch.Tensor, dtype: torch.dtype, shape: tuple[int, ...], stride: tuple[int, ...], device: str, offset: int) -> torch.Tensor:  # values (dense) laid out as the input was: compiled code may assume its size, stride and storage offset; a stride 0 dim shares its memory
    storage = torch.empty(offset + (1 + sum((n - 1) * s for n, s in zip(shape, stride, strict=True)) if all(shape) else 0), dtype=dtype, device=device)
    storage[torch.arange(storage.numel(), device=device).as_strided(shape, stride, offset).reshape(-1)] = values.to(dtype=dtype, device=device).reshape(-1)
    return torch.empty(0, dtype=dtype, device=device).set_(storage.untyped_storage(), offset, shape, stride)
def _load(values, dtype, shape, stride, device, offset=0): return _laid_out(torch.load(os.path.join(os.path.dirname(os.path.abspath(__file__)), "tensors", values + ".pt")) if isinstance(values, str) else torch.as_tensor(values), dtype, shape, stride, device, offset)  # values inline or a file in tensors/
def copies(inputs, dtype=None): return [(x.detach().to(dtype) if dtype and x.is_floating_point() else _load(x.detach(), x.dtype, x.shape, x.stride(), x.device, x.storage_offset())).requires_grad_(x.requires_grad) if isinstance(x, torch.Tensor) else x for x in inputs]
def run(call, inputs, dtype=None):  # the outputs, the gradients of their sum by the inputs that require grad (a training graph), the inputs written
    outputs, wrt = list(call(list(args := copies(inputs, dtype)))), [a for a in args if isinstance(a, torch.Tensor) and a.requires_grad]
    grads = torch.autograd.grad(torch.stack(floating).sum(), wrt, allow_unused=True) if wrt and (floating := [o.float().sum() for o in outputs if isinstance(o, torch.Tensor) and o.requires_grad]) else ()
    return [o.detach() if isinstance(o, torch.Tensor) else o for o in outputs] + [torch.zeros_like(a) if g is None else g for a, g in zip(wrt, grads)] + [args[i].detach() for i in WRITTEN_INPUTS]
def references(gm, inputs):  # eager's outputs, and fp64's: inputs, constants, the default dtype and the dtypes ops name widened
    wide = copy.deepcopy(gm).double()
    for node in wide.graph.nodes:
        if node.target is not torch.ops.aten.view.dtype:
            node.args, node.kwargs = torch.fx.node.map_aggregate((node.args, node.kwargs), lambda a: torch.float64 if a in (torch.float16, torch.bfloat16, torch.float32) else a)
    wide.recompile()
    try: return run(lambda args: gm(*args), inputs), (torch.set_default_dtype(torch.float64), run(lambda args: wide(*args), inputs, torch.float64))[1]
    finally: torch.set_default_dtype(torch.float32)
def compile_whole_stack(gm, inputs):  # as torch.compile compiles a Dynamo graph: AOT autograd, decompositions, Inductor
    torch._functorch.config.enable_autograd_cache = False  # its key does not cover the decompositions
    return (lambda compiled: lambda args: compiled(*args))(torch.compile(gm, backend="inductor", fullgraph=True, dynamic=False))
def check_accuracy(trace, compile_graph):
    try:
        gm, inputs = trace(Repro()), make_inputs()
        eager, reference = references(gm, inputs)
    except Exception as error:
        return print("REPRO BROKEN:", repr(error)) or 3
    try:
        outputs, failed = run(compile_graph(gm, inputs), inputs), False
    except Exception as error:
        return print("FAILS DIFFERENTLY:", repr(error)) or 2
    for index, (got, expected, wide) in enumerate(zip(outputs, eager, reference)):
        passed, rule, figures = leaf_verdict(got, expected, wide, TOL, CHECK_NON_FLOAT) if (
            got.shape, got.dtype) == (expected.shape, expected.dtype) else (False, f"metadata (compiled {tuple(got.shape)} {got.dtype})", ())
        failed |= not passed  # figures: rmse(compiled, fp64), rmse(eager, fp64), the ratio allowed
        print(f"out[{index}] {tuple(expected.shape)} {expected.dtype}: {rule}{'' if passed else ' FAIL'}", *(f"{f:.3e}" for f in figures))
    print("REPRODUCED" if failed else "PASS: the compiled graph matches the reference: the bug is fixed")
    return int(failed)
if __name__ == "__main__": sys.exit(check_accuracy(torch.fx.symbolic_trace, compile_whole_stack))  # 1: reproduced, 0: fixed, 2: fails differently, 3: the repro cannot run
# --- the post-AOT graphs AOT autograd and the decompositions made of this graph (torch 2.15.0+cu132), to read; the check above compiles afresh ---
# inference graph:
# def forward(self, arg0_1):
#     iota = torch.ops.prims.iota.default(2, start = 0, step = 1, dtype = torch.int64, device = device(type='cpu'), requires_grad = False)
#     convert_element_type = torch.ops.prims.convert_element_type.default(iota, torch.float32);  iota = None
#     clamp_min = torch.ops.aten.clamp_min.default(convert_element_type, 0.0);  convert_element_type = None
#     convert_element_type_1 = torch.ops.prims.convert_element_type.default(clamp_min, torch.int64)
#     add = torch.ops.aten.add.Tensor(convert_element_type_1, 1)
#     clamp_max = torch.ops.aten.clamp_max.default(add, 1);  add = None
#     _unsafe_index = torch.ops.aten._unsafe_index.Tensor(arg0_1, [None, None, convert_element_type_1])
#     _unsafe_index_1 = torch.ops.aten._unsafe_index.Tensor(arg0_1, [None, None, clamp_max]);  arg0_1 = clamp_max = None
#     sub = torch.ops.aten.sub.Tensor(clamp_min, convert_element_type_1);  clamp_min = convert_element_type_1 = None
#     clamp_min_1 = torch.ops.aten.clamp_min.default(sub, 0.0);  sub = None
#     clamp_max_1 = torch.ops.aten.clamp_max.default(clamp_min_1, 1.0);  clamp_min_1 = None
#     sub_1 = torch.ops.aten.sub.Tensor(_unsafe_index_1, _unsafe_index);  _unsafe_index_1 = None
#     mul_1 = torch.ops.aten.mul.Tensor(sub_1, clamp_max_1);  sub_1 = clamp_max_1 = None
#     add_1 = torch.ops.aten.add.Tensor(_unsafe_index, mul_1);  _unsafe_index = mul_1 = None
#     return (add_1,)