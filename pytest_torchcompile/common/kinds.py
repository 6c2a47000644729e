"""What went wrong in a graph: the one word a verdict's failure, a repro file's ``KIND``, its
marker and the minifier's interestingness share. Torch-free, and embedded in full repro files
with the judging code."""

from __future__ import annotations

import enum


class FailureKind(enum.StrEnum):
    ACCURACY = "accuracy"
    """The compiled graph runs, and an output deviates beyond the fp64 rule."""
    COMPILE_ERROR = "compile_error"
    RUNTIME_ERROR = "runtime_error"
    EAGER_ERROR = "eager_error"
    """The graph fails when run eagerly on its inputs: nothing is said about the compiler."""
    CRASHED = "crashed"
    """The judging process died on the graph (a crash the case recorded, or the judging's own)."""
    TIMED_OUT = "timed_out"
    """No verdict came from the judging process in time."""
    JUDGE_ERROR = "judge_error"
    """The judging itself failed: never the failure a case recorded."""
