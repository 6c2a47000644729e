"""The minify phase: every failing case's repro is reduced once the tests have run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from .results import MinifyResult
from .session import AccuracySession, MinifyJob


def _progress_writer(config: pytest.Config) -> Any:
    reporter = config.pluginmanager.get_plugin("terminalreporter")

    def show(progress: Any) -> None:
        if reporter is not None and reporter.isatty:
            reporter.rewrite(
                f"minifying {progress.case}: {progress.ops_left} ops left, "
                f"{progress.compiles} compiles, {progress.elapsed_s:.1f} s", erase=True)

    return show, reporter


def minify_job(job: MinifyJob, progress: Any = None) -> MinifyResult:
    from .minify import minify_repro

    return minify_repro(Path(job.repro_path), timeout_s=job.timeout_s, progress=progress)


def run_minify_phase(config: pytest.Config, state: AccuracySession) -> None:
    if not state.minify_jobs:
        return
    show, reporter = _progress_writer(config)
    for job in state.minify_jobs:
        result = minify_job(job, show)
        state.record_minified(job.case_id, result)
        if reporter is not None:
            if reporter.isatty:
                reporter.rewrite("", erase=True)
            reporter.write_line(result.summary_line(job.nodeid))
    state.minify_jobs.clear()
