"""Which shard of a suite split over machines this run is, as pytest-split (``--splits N --group
K``, K from 1) or pytest-shard (``--num-shards N --shard-id K``, K from 0) were told: the shards'
reports then say which part of the suite each one holds, and a merge can tell that one is missing."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest


@dataclass(frozen=True)
class Shard:
    splitter: str
    """The plugin that split the suite: ``pytest-split`` or ``pytest-shard``."""
    index: int
    """This shard, numbered as the splitter numbers it (see :attr:`first`)."""
    count: int

    @property
    def first(self) -> int:
        """The splitter's first shard number: pytest-split counts groups from 1, pytest-shard from 0."""
        return FIRST_INDEX[self.splitter]

    def describe(self) -> str:
        """E.g. ``pytest-split --group 2 of --splits 3``."""
        index_option, count_option = OPTIONS[self.splitter]
        return f"{self.splitter} {index_option} {self.index} of {count_option} {self.count}"

    def to_dict(self) -> dict[str, Any]:
        return {"splitter": self.splitter, "index": self.index, "count": self.count}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Shard:
        splitter, index, count = data["splitter"], data["index"], data["count"]
        if splitter not in FIRST_INDEX or not isinstance(index, int) or not isinstance(count, int):
            raise ValueError(f"not a shard: {data!r}")
        return cls(splitter, index, count)


FIRST_INDEX = {"pytest-split": 1, "pytest-shard": 0}
OPTIONS = {"pytest-split": ("--group", "--splits"), "pytest-shard": ("--shard-id", "--num-shards")}


def shard_of(config: pytest.Config) -> Shard | None:
    """The shard this run is, from the splitter's options; None for a run of the whole suite
    (neither plugin installed, or not asked to split)."""
    splits, group = getattr(config.option, "splits", None), getattr(config.option, "group", None)
    if splits is not None and group is not None:
        return Shard("pytest-split", int(group), int(splits))
    shards, shard_id = (
        getattr(config.option, "num_shards", None),
        getattr(config.option, "shard_id", None),
    )
    if shards is not None and shard_id is not None and int(shards) > 1:
        return Shard("pytest-shard", int(shard_id), int(shards))
    return None
