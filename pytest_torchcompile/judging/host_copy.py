"""A captured graph and its inputs copied to host memory where they live on an accelerator: what a
repro writes after a device-side error has made the device unusable to this process."""

from __future__ import annotations

import copy
import operator
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.fx

from pytest_torchcompile.judging.judge import devices_of, synchronize


@dataclass(frozen=True)
class HostTensor:
    """A host copy of an accelerator tensor that is written back to ``device`` in a repro."""

    data: torch.Tensor
    device: torch.device
    requires_grad: bool


@dataclass(frozen=True)
class HostCopy:
    gm: torch.fx.GraphModule
    inputs: list[Any]
    devices: frozenset[torch.device]

    def devices_usable(self) -> bool:
        """False once a device-side error has made the devices unusable to this process."""
        try:
            synchronize(set(self.devices))
        except RuntimeError:
            return False
        return True


def _to_host(value: Any) -> Any:
    if isinstance(value, torch.Tensor) and value.device.type != "cpu":
        return HostTensor(value.detach().cpu(), value.device, value.requires_grad)
    return value


def graph_constants(
    gm: torch.fx.GraphModule, ops: tuple[str, ...] = ("get_attr",)
) -> dict[str, Any]:
    """What ``gm``'s nodes of these kinds (constants; submodules too with ``call_module``) name."""
    return {
        str(node.target): operator.attrgetter(str(node.target))(gm)
        for node in gm.graph.nodes
        if node.op in ops
    }


def _constant_devices(gm: torch.fx.GraphModule) -> set[torch.device]:
    devices: set[torch.device] = set()
    for value in graph_constants(gm).values():
        devices |= (
            _constant_devices(value)
            if isinstance(value, torch.fx.GraphModule)
            else devices_of([value])
        )
    return devices


def _graph_on_host(gm: torch.fx.GraphModule) -> torch.fx.GraphModule:
    attributes = {
        target: _graph_on_host(value)
        if isinstance(value, torch.fx.GraphModule)
        else _to_host(value)
        for target, value in graph_constants(gm).items()
    }
    return torch.fx.GraphModule(attributes, copy.deepcopy(gm.graph))


def copy_to_host(gm: torch.fx.GraphModule, inputs: Sequence[Any]) -> HostCopy | None:
    """``gm`` and ``inputs`` in host memory, or None when nothing of them is on an accelerator."""
    devices = devices_of(inputs) | _constant_devices(gm)
    if not devices:
        return None
    return HostCopy(_graph_on_host(gm), [_to_host(v) for v in inputs], frozenset(devices))
