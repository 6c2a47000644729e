"""Failures with one root cause: checks whose minimal graphs share a signature (the ops of the
minimal graph, the stage that introduces the failure and the failure type) are one group, shown
once with the tests it breaks listed under it."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from pytest_torchcompile.common.results import CaseResult


@dataclass
class RootCause:
    """One signature and the failing checks that share it."""

    signature: str
    ops: list[str]
    stage: str
    stage_summary: str
    failure_type: str
    tests: list[str] = field(default_factory=list)
    minified: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def root_causes(results: Sequence[CaseResult]) -> list[RootCause]:
    """Groups of attributed failures, the ones breaking most tests first (ties by signature)."""
    groups: dict[str, RootCause] = {}
    for result in results:
        minify = result.minify
        if minify is None or (signature := minify.signature) is None:
            continue
        group = groups.get(signature)
        if group is None:
            assert minify.stage is not None, "a signature names the stage"
            group = groups[signature] = RootCause(
                signature, list(minify.ops), minify.stage, minify.stage_summary, minify.failure_type
            )
        if result.nodeid not in group.tests:
            group.tests.append(result.nodeid)
        if minify.path:
            group.minified.append(minify.path)
    for group in groups.values():
        group.tests.sort()
    return sorted(groups.values(), key=lambda group: (-len(group.tests), group.signature))


def _unwrapped(text: str, indent: str) -> list[str]:
    return [f"{indent}{text}"]


def root_cause_lines(
    results: Sequence[CaseResult], wrap: Callable[[str, str], list[str]] = _unwrapped
) -> list[str]:
    """``root causes: N`` then, per group, its stage, ops and failure type (one line, or
    ``wrap(text, indent)``'s lines) and the tests it breaks indented under it, whole; nothing
    when no failure was attributed."""
    groups = root_causes(results)
    if not groups:
        return []
    lines = [f"compile accuracy root causes: {len(groups)}"]
    for group in groups:
        tests = "test" if len(group.tests) == 1 else "tests"
        lines.extend(
            wrap(
                f"[{len(group.tests)} {tests}] {group.stage_summary or group.stage}"
                f" | ops: {', '.join(group.ops)} | {group.failure_type}",
                "  ",
            )
        )
        lines.extend(line for nodeid in group.tests for line in wrap(nodeid, "      "))
    return lines
