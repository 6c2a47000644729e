"""The run's state as the layers that check and minify see it. The session that owns it
(``run/session.AccuracySession``) sits above them and is handed down as a :class:`RunState`; the
checker it holds, which needs torch, is a :class:`Checker` to it."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from pytest_torchcompile.common.results import CaseResult, MinifyResult
from pytest_torchcompile.common.settings import CheckSettings


class Checker(Protocol):
    """What checks the tests of a process (``checking.runner.CheckRunner``), seen from a session
    that does not import it: checking needs torch, and the session serves processes without it."""

    def check(
        self,
        nodeid: str,
        fn: Callable[..., Any],
        args: Sequence[Any],
        kwargs: dict[str, Any],
        settings: CheckSettings,
        record_property: Callable[[str, object], None] | None,
        supersede: bool,
    ) -> Any: ...

    def running_test(
        self, nodeid: str, settings: CheckSettings, watch: bool
    ) -> AbstractContextManager[None]: ...

    def close(self) -> None: ...

    def features_off(self) -> list[str]: ...


@dataclass
class MinifyJob:
    """A repro waiting for the minify phase."""

    case_id: str
    nodeid: str
    repro_path: str
    timeout_s: float

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


class RunState(Protocol):
    """What checking and minifying read of the run and tell it; the lists are the session's, so
    they go through its methods."""

    enabled: bool
    repro_root: Path
    token: str
    """Names the session in the case directories it claims."""
    runner: Checker | None
    devices_lost_in: str | None
    """The test whose compiled code left this process's device unusable, or None."""
    on_minify_job: Callable[[MinifyJob], None] | None

    def record(self, *results: CaseResult) -> None: ...

    def drop_unreported_checks(self, nodeid: str) -> None: ...

    def queue_minify_job(self, job: MinifyJob) -> None: ...

    def take_minify_jobs(self) -> list[MinifyJob]: ...

    def record_minified(self, case_id: str, result: MinifyResult) -> None: ...
