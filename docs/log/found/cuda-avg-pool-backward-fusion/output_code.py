# AOT ID: ['0_inference']
from ctypes import c_void_p, c_long, c_int
import torch
import math
import random
import os
import tempfile
from math import inf, nan
from cmath import nanj
from torch._inductor.hooks import run_intermediate_hooks
from torch._inductor.utils import maybe_profile
from torch._inductor.codegen.memory_planning import _align as align
from torch import device, empty_strided
from torch._inductor.async_compile import AsyncCompile
from torch._inductor.select_algorithm import extern_kernels
import triton
import triton.language as tl
from torch._inductor.runtime.triton_heuristics import start_graph, end_graph
from torch._C import _cuda_getCurrentRawStream as get_raw_stream

aten = torch.ops.aten
inductor_ops = torch.ops.inductor
_quantized = torch.ops._quantized
assert_size_stride = torch._C._dynamo.guards.assert_size_stride
assert_alignment = torch._C._dynamo.guards.assert_alignment
empty_strided_cpu = torch._C._dynamo.guards._empty_strided_cpu
empty_strided_cpu_pinned = torch._C._dynamo.guards._empty_strided_cpu_pinned
empty_strided_cuda = torch._C._dynamo.guards._empty_strided_cuda
empty_strided_xpu = torch._C._dynamo.guards._empty_strided_xpu
empty_strided_mtia = torch._C._dynamo.guards._empty_strided_mtia
reinterpret_tensor = torch._C._dynamo.guards._reinterpret_tensor
alloc_from_pool = torch.ops.inductor._alloc_from_pool
async_compile = AsyncCompile()
empty_strided_p2p = torch._C._distributed_c10d._SymmetricMemory.empty_strided_p2p


# kernel path: /tmp/torchinductor_root/g6/cg6chcs663splojfauiv3ir4zrzdj72a5iiyiyqc4drz2vv2wkhu.py
# Topologically Sorted Source Nodes: [p, add, mul, mul_1, mul_2, mul_3, m, mul_5, mul_6, sum_1], Original ATen: [aten.avg_pool2d_backward, aten.add, aten.mul, aten.sum]
# Source node to ATen node mapping:
#   add => add
#   m => mul_4
#   mul => mul
#   mul_1 => mul_1
#   mul_2 => mul_2
#   mul_3 => mul_3
#   mul_5 => mul_5
#   mul_6 => mul_6
#   p => avg_pool2d_backward
#   sum_1 => sum_1
# Graph fragment:
#   %arg0_1 : Tensor "f32[4, 512, 28, 28][401408, 784, 28, 1]cuda:0" = PlaceHolder[target=arg0_1]
#   %arg1_1 : Tensor "f32[4, 512, 14, 14][100352, 196, 14, 1]cuda:0" = PlaceHolder[target=arg1_1]
#   %arg3_1 : Tensor "f32[4, 512, 28, 28][401408, 784, 28, 1]cuda:0" = PlaceHolder[target=arg3_1]
#   %arg4_1 : Tensor "f32[4, 512, 28, 28][401408, 784, 28, 1]cuda:0" = PlaceHolder[target=arg4_1]
#   %mul_2 : Tensor "f32[4, 512, 28, 28][401408, 784, 28, 1]cuda:0" = PlaceHolder[target=mul_2]
#   %arg5_1 : Tensor "f32[4, 512, 28, 28][512, 1, 0, 0]cuda:0" = PlaceHolder[target=arg5_1]
#   %avg_pool2d_backward : Tensor "f32[4, 512, 28, 28][401408, 784, 28, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.avg_pool2d_backward.default](args = (%arg1_1, %arg2_1, [2, 2], [2, 2], [0, 0], True, False, None), kwargs = {})
#   %add : Tensor "f32[4, 512, 28, 28][401408, 784, 28, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.add.Tensor](args = (%arg0_1, %avg_pool2d_backward), kwargs = {})
#   %mul : Tensor "f32[4, 512, 28, 28][401408, 784, 28, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.mul.Tensor](args = (%add, 0.9622504486493761), kwargs = {})
#   %mul_1 : Tensor "f32[4, 512, 28, 28][401408, 784, 28, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.mul.Tensor](args = (%mul, %arg3_1), kwargs = {})
#   %mul_2 : Tensor "f32[4, 512, 28, 28][401408, 784, 28, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.mul.Tensor](args = (%mul_1, %arg4_1), kwargs = {})
#   %mul_3 : Tensor "f32[4, 512, 28, 28][401408, 784, 28, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.mul.Tensor](args = (%mul_2, 0.2), kwargs = {})
#   %mul_4 : Tensor "f32[4, 512, 28, 28][401408, 784, 28, 1]cuda:0"[num_users=2] = call_function[target=torch.ops.aten.mul.Tensor](args = (%mul_3, 2.0), kwargs = {})
#   %mul_5 : Tensor "f32[4, 512, 28, 28][401408, 784, 28, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.mul.Tensor](args = (%mul_4, %arg5_1), kwargs = {})
#   %mul_6 : Tensor "f32[4, 512, 28, 28][401408, 784, 28, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.mul.Tensor](args = (%mul_4, %arg0_1), kwargs = {})
#   %sum_1 : Tensor "f32[4, 512, 1, 1][512, 1, 1, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.sum.dim_IntList](args = (%mul_6, [2, 3], True), kwargs = {})
#   return %mul_2,%mul_5,%sum_1
triton_per_fused_add_avg_pool2d_backward_mul_sum_0 = async_compile.triton('triton_per_fused_add_avg_pool2d_backward_mul_sum_0', '''
import triton
import triton.language as tl

from torch._inductor.runtime import triton_helpers, triton_heuristics
from torch._inductor.runtime.triton_helpers import libdevice, math as tl_math
from torch._inductor.runtime.hints import AutotuneHint, ReductionHint, TileHint, DeviceProperties
triton_helpers.set_driver_to_gpu()

@triton_heuristics.persistent_reduction(
    size_hints={'x': 2048, 'r0_': 1024},
    reduction_hint=ReductionHint.INNER,
    filename=__file__,
    triton_meta={'signature': {'in_ptr0': '*fp32', 'in_ptr1': '*fp32', 'in_ptr2': '*fp32', 'in_ptr3': '*fp32', 'in_ptr4': '*fp32', 'out_ptr1': '*fp32', 'out_ptr2': '*fp32', 'xnumel': 'i32', 'r0_numel': 'i32', 'XBLOCK': 'constexpr'}, 'device': DeviceProperties(type='cuda', index=0, multi_processor_count=132, cc=90, major=9, regs_per_multiprocessor=65536, max_threads_per_multi_processor=2048, max_threads_per_block=1024, warp_size=32), 'constants': {}, 'native_matmul': False, 'enable_fp_fusion': True, 'launch_pdl': False, 'disable_ftz': False, 'configs': [{(0,): [['tt.divisibility', 16]], (1,): [['tt.divisibility', 16]], (2,): [['tt.divisibility', 16]], (3,): [['tt.divisibility', 16]], (4,): [['tt.divisibility', 16]], (5,): [['tt.divisibility', 16]], (6,): [['tt.divisibility', 16]], (7,): [['tt.divisibility', 16]], (8,): [['tt.divisibility', 16]]}]},
    inductor_meta={'grid_type': 'Grid1D', 'autotune_hints': set(), 'kernel_name': 'triton_per_fused_add_avg_pool2d_backward_mul_sum_0', 'mutated_arg_names': [], 'optimize_mem': True, 'no_x_dim': None, 'atomic_add_found': False, 'num_load': 5, 'num_store': 2, 'num_reduction': 1, 'backend_hash': '91D1D1166449D9E2EB66EB9770C9E2C3B0FEB787341F27FEB4D3F0338DA50336', 'assert_indirect_indexing': True, 'autotune_local_cache': True, 'autotune_pointwise': True, 'autotune_remote_cache': None, 'force_disable_caches': False, 'dynamic_scale_rblock': True, 'max_autotune': False, 'max_autotune_pointwise': False, 'min_split_scan_rblock': 256, 'spill_threshold': 16, 'store_cubin': False, 'deterministic': False, 'force_filter_reduction_configs': False, 'mix_order_reduction_allow_multi_stages': False, 'are_deterministic_algorithms_enabled': False, 'tiling_scores': {'x': 24576, 'r0_': 32112640}}
)
@triton.jit
def triton_per_fused_add_avg_pool2d_backward_mul_sum_0(in_ptr0, in_ptr1, in_ptr2, in_ptr3, in_ptr4, out_ptr1, out_ptr2, xnumel, r0_numel, XBLOCK : tl.constexpr):
    xnumel = 2048
    r0_numel = 784
    R0_BLOCK: tl.constexpr = 1024
    rnumel = r0_numel
    RBLOCK: tl.constexpr = R0_BLOCK
    xoffset = tl.program_id(0) * XBLOCK
    xindex = xoffset + tl.arange(0, XBLOCK)[:, None]
    xmask = xindex < xnumel
    r0_index = tl.arange(0, R0_BLOCK)[None, :]
    r0_offset = 0
    r0_mask = r0_index < r0_numel
    roffset = r0_offset
    rindex = r0_index
    r0_3 = r0_index
    x0 = xindex
    r0_1 = (r0_index % 28)
    r0_2 = r0_index // 28
    tmp0 = tl.load(in_ptr0 + (r0_3 + 784*x0), r0_mask & xmask, other=0.0)
    tmp1 = tl.load(in_ptr1 + (14*((r0_2 // 2) * ((r0_2 // 2) <= ((-1) + ((14) * ((14) <= (1 + (r0_2 // 2))) + (1 + (r0_2 // 2)) * ((1 + (r0_2 // 2)) < (14))))) + ((-1) + ((14) * ((14) <= (1 + (r0_2 // 2))) + (1 + (r0_2 // 2)) * ((1 + (r0_2 // 2)) < (14)))) * (((-1) + ((14) * ((14) <= (1 + (r0_2 // 2))) + (1 + (r0_2 // 2)) * ((1 + (r0_2 // 2)) < (14)))) < (r0_2 // 2))) + 196*x0 + ((r0_1 // 2) * ((r0_1 // 2) <= ((-1) + ((14) * ((14) <= (1 + (r0_1 // 2))) + (1 + (r0_1 // 2)) * ((1 + (r0_1 // 2)) < (14))))) + ((-1) + ((14) * ((14) <= (1 + (r0_1 // 2))) + (1 + (r0_1 // 2)) * ((1 + (r0_1 // 2)) < (14)))) * (((-1) + ((14) * ((14) <= (1 + (r0_1 // 2))) + (1 + (r0_1 // 2)) * ((1 + (r0_1 // 2)) < (14)))) < (r0_1 // 2)))), r0_mask & xmask, eviction_policy='evict_last', other=0.0)
    tmp15 = tl.load(in_ptr2 + (r0_3 + 784*x0), r0_mask & xmask, other=0.0)
    tmp17 = tl.load(in_ptr3 + (r0_3 + 784*x0), r0_mask & xmask, other=0.0)
    tmp23 = tl.load(in_ptr4 + (x0), xmask, eviction_policy='evict_last')
    tmp2 = (tmp1 / 4)
    tmp3 = r0_2 // 2
    tmp4 = ((14) * ((14) <= (1 + (r0_2 // 2))) + (1 + (r0_2 // 2)) * ((1 + (r0_2 // 2)) < (14)))
    tmp5 = tmp3 < tmp4
    tmp6 = r0_1 // 2
    tmp7 = ((14) * ((14) <= (1 + (r0_1 // 2))) + (1 + (r0_1 // 2)) * ((1 + (r0_1 // 2)) < (14)))
    tmp8 = tmp6 < tmp7
    tmp9 = tmp5 & tmp8
    tmp10 = tl.full([1, 1], 0.0, tl.float32)
    tmp11 = tl.where(tmp9, tmp2, tmp10)
    tmp12 = tmp0 + tmp11
    tmp13 = tl.full([1, 1], 0.9622504486493761, tl.float32)
    tmp14 = tmp12 * tmp13
    tmp16 = tmp14 * tmp15
    tmp18 = tmp16 * tmp17
    tmp19 = tl.full([1, 1], 0.2, tl.float32)
    tmp20 = tmp18 * tmp19
    tmp21 = tl.full([1, 1], 2.0, tl.float32)
    tmp22 = tmp20 * tmp21
    tmp24 = tmp22 * tmp23
    tmp25 = tmp22 * tmp0
    tmp26 = tl.broadcast_to(tmp25, [XBLOCK, R0_BLOCK])
    tmp28 = tl.where(r0_mask & xmask, tmp26, 0)
    tmp29 = tl.sum(tmp28, 1)[:, None].to(tl.float32)
    tl.store(out_ptr1 + (r0_3 + 784*x0), tmp24, r0_mask & xmask)
    tl.store(out_ptr2 + (x0), tmp29, xmask)
''', device_str='cuda')


async_compile.wait(globals())
del async_compile

class Runner:
    def __init__(self, partitions):
        self.partitions = partitions

    def recursively_apply_fns(self, fns):
        new_callables = []
        for fn, c in zip(fns, self.partitions):
            new_callables.append(fn(c))
        self.partitions = new_callables

    def call(self, args):
        arg0_1, arg1_1, arg2_1, arg3_1, arg4_1, arg5_1 = args
        args.clear()
        assert_size_stride(arg0_1, (4, 512, 28, 28), (401408, 784, 28, 1))
        assert_size_stride(arg1_1, (4, 512, 14, 14), (100352, 196, 14, 1))
        assert_size_stride(arg2_1, (4, 512, 28, 28), (401408, 784, 28, 1))
        assert_size_stride(arg3_1, (4, 512, 28, 28), (401408, 784, 28, 1))
        assert_size_stride(arg4_1, (4, 512, 28, 28), (401408, 784, 28, 1))
        assert_size_stride(arg5_1, (4, 512, 28, 28), (512, 1, 0, 0))
        with torch.cuda._DeviceGuard(0):
            torch.cuda.set_device(0)
            buf1 = empty_strided_cuda((4, 512, 28, 28), (401408, 784, 28, 1), torch.float32)
            buf2 = empty_strided_cuda((4, 512, 1, 1), (512, 1, 1, 1), torch.float32)
            # Topologically Sorted Source Nodes: [p, add, mul, mul_1, mul_2, mul_3, m, mul_5, mul_6, sum_1], Original ATen: [aten.avg_pool2d_backward, aten.add, aten.mul, aten.sum]
            stream0 = get_raw_stream(0)
            triton_per_fused_add_avg_pool2d_backward_mul_sum_0.run(arg0_1, arg1_1, arg3_1, arg4_1, arg5_1, buf1, buf2, 2048, 784, stream=stream0)
            del arg0_1
            del arg1_1
            del arg3_1
            del arg4_1
            del arg5_1
        return (buf1, buf2, )

runner = Runner(partitions=[])
call = runner.call
recursively_apply_fns = runner.recursively_apply_fns


def get_args():
    from torch._dynamo.testing import rand_strided
    arg0_1 = rand_strided((4, 512, 28, 28), (401408, 784, 28, 1), device='cuda:0', dtype=torch.float32)
    arg1_1 = rand_strided((4, 512, 14, 14), (100352, 196, 14, 1), device='cuda:0', dtype=torch.float32)
    arg2_1 = rand_strided((4, 512, 28, 28), (401408, 784, 28, 1), device='cuda:0', dtype=torch.float32)
    arg3_1 = rand_strided((4, 512, 28, 28), (401408, 784, 28, 1), device='cuda:0', dtype=torch.float32)
    arg4_1 = rand_strided((4, 512, 28, 28), (401408, 784, 28, 1), device='cuda:0', dtype=torch.float32)
    arg5_1 = rand_strided((4, 512, 28, 28), (512, 1, 0, 0), device='cuda:0', dtype=torch.float32)
    return [arg0_1, arg1_1, arg2_1, arg3_1, arg4_1, arg5_1]


def benchmark_compiled_module(args, times=10, repeat=10):
    from torch._inductor.utils import print_performance
    fn = lambda: call(list(args))
    return print_performance(fn, times=times, repeat=repeat)


if __name__ == "__main__":
    from torch._inductor.wrapper_benchmark import compiled_module_main
    args = get_args()
    compiled_module_main('None', lambda times, repeat: benchmark_compiled_module(args, times=times, repeat=repeat))
