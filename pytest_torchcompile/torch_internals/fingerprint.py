"""What the compiler code of a process is, to tell a process that patched the compiler from a
fresh one."""

from __future__ import annotations

import contextlib
import dis
import functools
import hashlib
import importlib
import importlib.abc
import importlib.machinery
import sys
import types
import warnings
from collections.abc import Iterator, Sequence
from typing import Any

import torch
import torch.fx

from pytest_torchcompile.torch_internals.compiling import first_missing_attribute
from pytest_torchcompile.torch_internals.interception import not_intercepted

_FINGERPRINTED_MODULES = (
    "torch._inductor",
    "torch._decomp",
    "torch._refs",
    "torch._prims",
    "torch._functorch",
)


_LOWERING_TABLES = (
    ("torch._inductor.lowering", "lowerings"),
    ("torch._inductor.decomposition", "decompositions"),
)
"""Tables a process adds its own entries to (a lowering, a decomposition) and Inductor fills
lazily (an implicit fallback per op without a lowering): compared entry by entry."""


def lowering_tables_missing() -> str | None:
    """The table :func:`compiler_fingerprint` compares entry by entry that this torch lacks
    (the modules are imported for the answer); None where it has them all."""
    return first_missing_attribute(_LOWERING_TABLES, holds=lambda table: isinstance(table, dict))


def compiler_fingerprint(modules: Sequence[str] = ()) -> dict[str, str]:
    """What the compiler code of this process is: a digest of each loaded compiler module's
    functions and class methods (Inductor, the decompositions and references it applies, AOT
    autograd), by where their code was defined, and each entry of the lowering and decomposition
    tables. A process that patched compiler code or registered its own (a mock, a lowering)
    differs here from a fresh process; ``modules`` not loaded yet are imported first. The
    plugin's own interception (:func:`intercept_inductor`) is not counted."""
    with not_intercepted():
        return _compiler_fingerprint(modules)


def _compiler_fingerprint(modules: Sequence[str]) -> dict[str, str]:
    for name in modules:
        if name not in sys.modules:
            with contextlib.suppress(Exception), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                importlib.import_module(name)
    entries: dict[str, str] = {}
    for module_name, module in list(sys.modules.items()):
        if module is not None and module_name.startswith(_FINGERPRINTED_MODULES):
            entries[module_name] = _digest("\n".join(_module_code(module_name, vars(module))))
    for module_name, table in _LOWERING_TABLES:
        for key, entry in list(getattr(sys.modules.get(module_name), table, {}).items()):
            if _is_code(entry):
                entries[f"{module_name}.{table}[{key}]"] = _digest(_code_identity(entry))
    return entries


def _digest(text: str) -> str:
    return hashlib.blake2b(text.encode(), digest_size=8).hexdigest()


def _module_code(module_name: str, namespace: dict[str, Any]) -> Iterator[str]:
    for name, value in sorted(namespace.items()):
        if isinstance(value, type):
            if value.__module__ == module_name:
                yield from _class_code(name, value)
        elif _is_code(value):
            yield f"{name} = {_code_identity(value)}"


def _class_code(name: str, cls: type) -> Iterator[str]:
    """The code of a class's methods, static and class methods and property getters."""
    for member_name, member in sorted(vars(cls).items()):
        if isinstance(member, (staticmethod, classmethod)):
            member = member.__func__
        elif isinstance(member, property):
            member = member.fget
        if isinstance(member, functools.partial) and _ROUTED_ORIGINAL in member.keywords:
            continue
        if _is_code(member):
            yield f"{name}.{member_name} = {_code_identity(member)}"


_ROUTED_ORIGINAL = "_original_impl"
"""Inductor sets routers on its Triton kernel overrides at its first Triton kernel (the
class's ``_setup_libdevice_routing``, fp64 to libdevice), each holding the override it wraps
under this keyword: a process that generated a Triton kernel has not patched the compiler, so
routers are left out (the overrides they route to count where they are defined)."""


_CODE_TYPES = (types.FunctionType, types.MethodType, types.BuiltinFunctionType, functools.partial)


def _is_code(value: Any) -> bool:
    """A function (or a mock standing in for one); not an object that is merely callable, which
    a module may create lazily (a cache, a selector)."""
    return isinstance(value, _CODE_TYPES) or type(value).__module__ == "unittest.mock"


def _code_identity(value: Any, depth: int = 0) -> str:
    """Where a callable's code was defined, with what its closure holds (a registered lowering is
    a wrapper around the function and op it was given), or its type for other callables (a mock)."""
    if isinstance(value, functools.partial):
        return "partial of " + _code_identity(value.func, depth + 1)
    if isinstance(value, types.MethodType):
        value = value.__func__
    if isinstance(value, types.FunctionType):
        code = value.__code__
        text = (
            f"{value.__module__}.{value.__qualname__} at {code.co_filename}:{code.co_firstlineno}"
        )
        if depth < 3 and value.__closure__:
            rebound = _rebound_free_variables(code)
            held = [
                _held(cell, depth)
                for name, cell in zip(code.co_freevars, value.__closure__, strict=True)
                if name not in rebound
            ]
            text += f" ({', '.join(filter(None, held))})"
        return text
    if isinstance(value, (types.BuiltinFunctionType, types.BuiltinMethodType)):
        return f"builtin {getattr(value, '__module__', None)}.{value.__qualname__}"
    return f"a {type(value).__module__}.{type(value).__qualname__}"


# A pure function of immutable code, and thousands of registered wrappers share a few codes:
# disassembling each anew took the fingerprint seconds.
@functools.lru_cache(maxsize=4096)
def _rebound_free_variables(code: types.CodeType) -> frozenset[str]:
    """The free variables a function assigns itself (``nonlocal``): state it keeps at run time,
    not code. A memoizing wrapper holds its result in one (torch 2.14's ``prefetchable_cache``
    around ``codecache.triton_key``): a process that has compiled would differ from one that has
    not."""
    if not any(opcode in code.co_code[::2] for opcode in _REBINDING_OPCODES):
        return frozenset()  # most functions, told without disassembling them
    return frozenset(
        instruction.argval
        for instruction in dis.get_instructions(code)
        if instruction.opcode in _REBINDING_OPCODES
    ) & frozenset(code.co_freevars)


_REBINDING_OPCODES = (dis.opmap["STORE_DEREF"], dis.opmap["DELETE_DEREF"])


def _held(cell: Any, depth: int) -> str:
    """What a closure cell holds, where it tells one closure of a function from another: a
    function, an op, a plain value."""
    try:
        contents = cell.cell_contents
    except ValueError:  # an empty cell
        return ""
    if isinstance(contents, (types.FunctionType, functools.partial)):
        return _code_identity(contents, depth + 1)
    if isinstance(
        contents, (str, int, float, bool, torch._ops.OpOverload, torch._ops.OpOverloadPacket)
    ):
        return str(contents)
    return ""
