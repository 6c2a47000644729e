"""Versions, devices, the Inductor config and the features this torch leaves off, for repro
headers and reports."""

from __future__ import annotations

import platform
from typing import Any

import torch
import torch.fx

from pytest_torchcompile.torch_internals.availability import features_off
from pytest_torchcompile.torch_internals.config import inductor_config_diff


def environment() -> dict[str, str]:
    """Versions and device names for repro headers and reports."""
    env = {
        "torch": torch.__version__,
        "python": platform.python_version(),
        "cpu": platform.processor() or platform.machine(),
    }
    try:
        import triton

        env["triton"] = triton.__version__
    except ImportError:
        env["triton"] = "not installed"
    if torch.cuda.is_available():
        env["cuda_device"] = torch.cuda.get_device_name()
        env["cuda"] = str(torch.version.cuda)
    return env


def report_environment() -> dict[str, Any]:
    """Versions, devices, the non-default Inductor config and the features this torch leaves
    off: the ``environment`` of a report."""
    return {**environment(), "inductor_config": inductor_config_diff(),
            "features_off": [feature.to_dict() for feature in features_off()]}
