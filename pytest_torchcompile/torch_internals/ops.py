"""What an FX node's target is (an op overload, a view) and where an op outside
``aten`` comes from."""

from __future__ import annotations

import dataclasses
import importlib
import os
import pathlib
import re
import sys
import types
from typing import Any

import torch
import torch.fx


def is_op_overload(target: Any) -> bool:
    """Whether an FX node target is one overload of an aten (or other registered) op."""
    return isinstance(target, torch._ops.OpOverload)


def is_view_op(target: Any) -> bool:
    """Whether an FX node target returns a view of an input (its storage, no values of its own)."""
    if not isinstance(target, torch._ops.OpOverload):
        return False
    return any(
        result.alias_info is not None and not result.alias_info.is_write
        for result in target._schema.returns
    )


def attribute_read(target: Any) -> str | None:
    """The tensor attribute that a torch-level graph's call of ``target`` reads, where Dynamo
    writes that read as a call of a C function it cannot trace again (``x.data`` as
    ``torch._C._autograd._get_data_attr(x)``), or None: a graph kept to be compiled again or
    written out spells the read as the attribute."""
    return "data" if target is getattr(torch._C._autograd, "_get_data_attr", None) else None


@dataclasses.dataclass(frozen=True)
class OpOrigin:
    """An op a graph calls that ``import torch`` alone may not define, and where it comes from."""

    qualname: str
    """``namespace::name``, as ``torch.ops.namespace.name``."""
    module: str | None
    """The Python module whose import registers it; None when it could not be found."""
    search_path: str | None
    """The ``sys.path`` entry that module imports from (a test module's directory, say)."""


def op_origins(gm: torch.fx.GraphModule) -> list[OpOrigin]:
    """Every op outside ``aten`` that ``gm`` (and the graphs it holds) calls, with the module
    that registers it: Inductor's own prims, ops a model's package or test module registers
    through ``torch.library``, ops of packages such as torchvision, higher-order ops."""
    origins: dict[str, OpOrigin] = {}
    for module in gm.modules():
        if not isinstance(module, torch.fx.GraphModule):
            continue
        for node in module.graph.nodes:
            if node.op != "call_function":
                continue
            qualname = _op_qualname(node.target)
            if qualname is None or qualname.startswith("aten::") or qualname in origins:
                continue
            origins[qualname] = _origin(node.target, qualname)
    return list(origins.values())


_KNOWN_ORIGINS: dict[str, OpOrigin] = {}


def _origin(target: Any, qualname: str) -> OpOrigin:
    """Looked up once per process (the lookup reads every loaded module's path): the module that
    registered an op stays the same, and the minifier asks again for every candidate."""
    known = _KNOWN_ORIGINS.get(qualname)
    if known is None:
        name = _op_module(target, qualname)
        known = _KNOWN_ORIGINS[qualname] = OpOrigin(qualname, name, _search_path(name))
    return known


def _op_qualname(target: Any) -> str | None:
    if isinstance(target, torch._ops.HigherOrderOperator):
        return f"higher_order::{target.name()}"
    if isinstance(target, torch._ops.OpOverload):
        return str(target._schema.name)
    if isinstance(target, torch._ops.OpOverloadPacket):
        return str(target._qualified_op_name)
    return None


_LIBRARY_FILES = re.compile(r"torch/(_library/[^/]+|library|_prims/__init__)\.py$")
"""Files that register ops on behalf of the module that asked: where an op was registered says
nothing about who defined it when it is one of these."""


def _op_module(target: Any, qualname: str) -> str | None:
    namespace, name = qualname.split("::", 1)
    if isinstance(target, torch._ops.HigherOrderOperator):
        return type(target).__module__
    found = (
        (_inductor_prim_module(name) if namespace == "prims" else None)
        or _custom_op_module(qualname)
        or _registering_module(qualname)
    )
    if found is not None:
        return found
    top_level = sys.modules.get(namespace)
    return namespace if top_level is not None and getattr(top_level, "__file__", None) else None


def _inductor_prim_module(name: str) -> str | None:
    """Inductor's prims module where it defines the prim ``name``."""
    # Inductor's prims (the low-memory max pool MaxPool2d lowers to, say) exist only once this
    # module is imported; compiling imports it, tracing a repro's graph does not.
    inductor_prims = sys.modules.get(_INDUCTOR_PRIMS) or _imported(_INDUCTOR_PRIMS)
    if inductor_prims is not None and name in vars(inductor_prims):
        return inductor_prims.__name__
    return None


def _custom_op_module(qualname: str) -> str | None:
    """The module whose function defined the custom op (``torch.library.custom_op``), outside
    torch and ``__main__``."""
    opdef = getattr(getattr(torch._library, "custom_ops", None), "OPDEFS", {}).get(qualname)
    defined_by = getattr(getattr(opdef, "_init_fn", None), "__module__", None)
    if (
        isinstance(defined_by, str)
        and defined_by != "__main__"
        and not defined_by.startswith("torch.")
    ):
        return defined_by
    return None


def _registering_module(qualname: str) -> str | None:
    """The module of the file the dispatcher says registered the op, where that is no file of
    torch's that registers ops on behalf of another module (:data:`_LIBRARY_FILES`)."""
    dispatch_dump = getattr(torch._C, "_dispatch_dump", None)
    try:
        dump = dispatch_dump(qualname) if dispatch_dump is not None else ""
    except RuntimeError:
        dump = ""
    registered = re.search(r"^debug: registered at (.+\.py):\d+$", dump, re.MULTILINE)
    if registered and not _LIBRARY_FILES.search(registered.group(1).replace("\\", "/")):
        return _module_of_file(registered.group(1))
    return None


_INDUCTOR_PRIMS = "torch._inductor.inductor_prims"


def _imported(name: str) -> types.ModuleType | None:
    try:
        return importlib.import_module(name)
    except ImportError:
        return None


def op_registry_missing() -> str | None:
    """What :func:`op_origins` reads to tell where an op was registered that this torch lacks;
    None where it has it all."""
    if not callable(getattr(torch._C, "_dispatch_dump", None)):
        return "torch._C._dispatch_dump"
    return None if _imported(_INDUCTOR_PRIMS) is not None else _INDUCTOR_PRIMS


def _module_of_file(path: str) -> str | None:
    wanted = os.path.normcase(os.path.realpath(path))
    for name, module in list(sys.modules.items()):
        file = getattr(module, "__file__", None)
        if name != "__main__" and file and os.path.normcase(os.path.realpath(file)) == wanted:
            return name
    return None


def _search_path(name: str | None) -> str | None:
    module = sys.modules.get(name) if name else None
    file = getattr(module, "__file__", None)
    if name is None or name.startswith("torch.") or not file:
        return None
    depth = name.count(".") + (1 if os.path.basename(file).startswith("__init__.") else 0)
    return str(pathlib.Path(file).resolve().parents[depth])


_ROUNDING = frozenset(
    {"floor", "ceil", "round", "trunc", "sign", "sgn", "remainder", "fmod", "floor_divide"}
)


def rounds_to_steps(target: Any) -> bool:
    """Whether an op maps its floating input onto steps (rounding, a sign, a remainder, a floor or
    truncating division): a rounding difference of what it reads can move its result by a whole
    step."""
    return _packet_name(target) in _ROUNDING or (
        _packet_name(target) == "div"
        and str(getattr(target, "_overloadname", "")).endswith("_mode")
    )


def decomposed_from(node: torch.fx.Node) -> Any:
    """The op a post-AOT graph's node was decomposed from (a softmax's ``amax``, ``sub``, ``exp``,
    ``sum`` and ``div``: ``aten._softmax``); None where the trace did not record one."""
    return node.meta.get("original_aten")


def _packet_name(target: Any) -> str:
    return str(
        getattr(
            getattr(target, "overloadpacket", None), "__name__", getattr(target, "__name__", "")
        )
    )


_SELECTING_OR_SATURATING = frozenset(
    {
        # An element passes or not, or which element wins: the other's deviation is lost.
        "relu",
        "relu6",
        "threshold",
        "threshold_backward",
        "hardtanh",
        "hardtanh_backward",
        "clamp",
        "clamp_min",
        "clamp_max",
        "where",
        "masked_fill",
        "maximum",
        "minimum",
        "fmax",
        "fmin",
        "max",
        "min",
        "amax",
        "amin",
        "sort",
        "topk",
        "kthvalue",
        "median",
        "nanmedian",
        "mode",
        "cummax",
        "cummin",
        "max_pool2d_with_indices",
        "max_pool3d_with_indices",
        "adaptive_max_pool2d",
        "adaptive_max_pool3d",
        "nan_to_num",
        "hardsigmoid",
        "hardswish",
        "scatter_reduce",
        # Even functions: a deviation of the sign vanishes (rounding ops: see _ROUNDING).
        "abs",
        "cos",
        "cosh",
        "pow",
        # Saturating: far from zero, the result no longer depends on the input.
        "tanh",
        "sigmoid",
        "erf",
        "erfc",
        "gelu",
        "silu",
        "mish",
        "elu",
        "softplus",
        # Invariant to a shift or scale of their input (a post-AOT graph holds them decomposed: see
        # decomposed_from).
        "_softmax",
        "_log_softmax",
        "logsumexp",
        "var",
        "std",
        "var_mean",
        "std_mean",
        "native_layer_norm",
        "native_batch_norm",
        "_native_batch_norm_legit",
        "_native_batch_norm_legit_no_training",
        "_native_batch_norm_legit_functional",
        "native_group_norm",
        # Writes over part of an input: the elements overwritten are lost.
        "index_put",
        "_unsafe_index_put",
        "scatter",
        "slice_scatter",
        "select_scatter",
        "as_strided_scatter",
        "diagonal_scatter",
        "masked_scatter",
        "index_copy",
        "index_fill",
        "copy",
        "fill",
    }
)
"""Ops whose result can stay as it is while an input deviates."""

_FULL_SUPPORT_REDUCTIONS = frozenset(
    {
        "sum",
        "mean",
        "prod",
        "mm",
        "bmm",
        "addmm",
        "baddbmm",
        "addmv",
        "mv",
        "dot",
        "convolution",
        "convolution_backward",
        "avg_pool2d",
        "avg_pool3d",
        "avg_pool2d_backward",
        "avg_pool3d_backward",
        "_adaptive_avg_pool2d",
        "_adaptive_avg_pool3d",
        "split",
        "split_with_sizes",
        "unbind",
        "chunk",
    }
)
"""Ops with fewer result elements than input elements that still read every input element: every
deviation reaches their result (a split's parts together hold all of it)."""


def can_mask_a_deviation(target: Any, inputs: list[Any], result: Any) -> bool:
    """Whether the op ``target`` applied to ``inputs`` (real or fake tensors among them) can give
    ``result`` unchanged, or changed less than eager rounding, while a floating input deviates: it
    selects, saturates, rounds, normalises, overwrites or drops elements, or narrows a floating
    dtype. Ops outside these (adds, products, contractions, smooth maps) carry a deviation of
    their inputs to their result, where the graph's outputs show it."""
    name = _packet_name(target)
    floating = [
        value for value in inputs if isinstance(value, torch.Tensor) and value.is_floating_point()
    ]
    if not floating:
        return False
    if name in _SELECTING_OR_SATURATING or rounds_to_steps(target):
        return True
    results = _tensors_of(result)
    return _narrows(results, floating) or _drops_elements(name, results, floating)


def _tensors_of(result: Any) -> list[torch.Tensor]:
    """The tensors an op returned, alone or among several results."""
    return [
        value
        for value in (result if isinstance(result, (tuple, list)) else (result,))
        if isinstance(value, torch.Tensor)
    ]


def _narrows(results: list[torch.Tensor], floating: list[torch.Tensor]) -> bool:
    """Whether a result is not floating, or in a coarser dtype than the finest floating input."""
    finest = min(torch.finfo(value.dtype).eps for value in floating)
    return any(
        not (value.is_floating_point() or value.is_complex())
        or torch.finfo(value.dtype).eps > finest
        for value in results
    )


def _drops_elements(name: str, results: list[torch.Tensor], floating: list[torch.Tensor]) -> bool:
    """Whether the results hold fewer elements than the largest floating input, for an op that
    does not read every input element into them anyway (:data:`_FULL_SUPPORT_REDUCTIONS`)."""
    # A complex element holds two real ones (a real-to-complex FFT keeps every input element).
    return name not in _FULL_SUPPORT_REDUCTIONS and sum(
        value.numel() * (2 if value.is_complex() else 1) for value in results
    ) < max(value.numel() for value in floating)
