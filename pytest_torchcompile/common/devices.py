"""Which CUDA device each process of a run works on. Torch-free: the count of visible devices is
given."""

from __future__ import annotations

import re

DEVICES_ENV = "PYTEST_TORCHCOMPILE_DEVICES"


def parse_devices(text: str) -> list[int]:
    """The CUDA device indices a list like ``'0,2'`` names (none for a blank text); ValueError
    for anything else: a part that is no index (``'cuda:0'``, ``'-1'``, ``'0 1'``), or an empty
    one (``'0,,1'``, ``'0,'``)."""
    if not text.strip():
        return []
    parts = [part.strip() for part in text.split(",")]
    if not all(part.isascii() and part.isdigit() for part in parts):
        raise ValueError(f"not a list of CUDA device indices: {text!r}")
    return [int(part) for part in parts]


def device_index(worker_id: str | None, listed: list[int], count: int) -> int | None:
    """The CUDA device a process works on: ``gwK`` gets entry ``K mod G`` of the listed devices
    (all visible ones when none are listed); a single process gets the first listed device, or
    None (the current device) when none are listed. None without CUDA devices."""
    if count <= 0:
        return None
    devices = listed or list(range(count))
    match = re.fullmatch(r"gw(\d+)", worker_id or "")
    if match is None:
        return devices[0] if listed else None
    return devices[int(match.group(1)) % len(devices)]
