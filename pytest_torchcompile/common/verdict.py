"""A check's verdict: its status and its outputs' comparison (each output's result is
:mod:`leaves`'). Kept free of torch so that the processes that only gather and report results (an
xdist controller, a run without ``--compile-accuracy``) need not import it."""

from __future__ import annotations

import enum
from dataclasses import dataclass

import pytest

from pytest_torchcompile.common.kinds import FailureKind
from pytest_torchcompile.common.leaves import LeafResult, LeafRule


class Status(enum.StrEnum):
    PASS = "pass"
    FAIL_ACCURACY = "fail_accuracy"
    FAIL_COMPILE = "fail_compile"
    FAIL_RUNTIME = "fail_runtime"
    EAGER_FAIL = "eager_fail"
    EAGER_NONDETERMINISTIC = "eager_nondeterministic"
    """Eager disagrees with itself on the same inputs, deterministic kernels too, and compiled
    code lies within the spread of its runs: not failed (eager's own nondeterminism is no fault
    of the compiler), and weaker evidence than a pass; reported with where eager moved."""
    OUT_OF_MEMORY = "out_of_memory"
    """A run of the check (eager, fp64 or compiled) ran out of host or device memory: nothing
    could be judged, and nothing says the compiler is at fault."""
    NO_FP64_REFERENCE = "no_fp64_reference"
    UNCONFIRMED = "unconfirmed"
    """The check found a failure that its repro, judged in a fresh process, does not show: not
    failed, reported with the reason."""
    HANDLED_ERROR = "handled_error"
    """A compiled graph raised (compiling or running) into the test, which handled the error (a
    ``pytest.raises`` around it) and went on as it does without the plugin: the error is the
    test's to expect. Reported for what it is, neither a failure nor minified."""
    INCONCLUSIVE = "inconclusive"
    """Every output the fp64 rule fails is one that no result in its dtype can be judged by
    (an overflow at the edge of the dtype's range, or one eager itself made, non-finite where
    fp64 is finite): not failed, and no evidence that the compiled code is right either; reported
    with the reason."""
    NOT_JUDGED = "not_judged"
    """The check ran, but its results hold no tensor to judge (the model returned None, a string,
    an opaque object): not a failure of the compiler, and no evidence that it is right."""

    @property
    def is_compiler_failure(self) -> bool:
        return self in (Status.FAIL_ACCURACY, Status.FAIL_COMPILE, Status.FAIL_RUNTIME)

    @property
    def failure_kind(self) -> FailureKind | None:
        """The kind of failure a check of this status records in its repro, None for a status
        that writes none."""
        return _FAILURE_KIND_OF.get(self)

    @classmethod
    def recorded(cls, kind: FailureKind) -> Status | None:
        """The status of a check whose repro records ``kind`` (``FailureKind.ACCURACY``:
        ``fail_accuracy``), None for a kind no repro records (the judging's own failures)."""
        return next(
            (status for status, recorded in _FAILURE_KIND_OF.items() if recorded is kind), None
        )


_FAILURE_KIND_OF = {
    Status.FAIL_ACCURACY: FailureKind.ACCURACY,
    Status.FAIL_COMPILE: FailureKind.COMPILE_ERROR,
    Status.FAIL_RUNTIME: FailureKind.RUNTIME_ERROR,
    Status.EAGER_FAIL: FailureKind.EAGER_ERROR,
}
"""The one table between a check's status and the failure kind its repro records."""


# pytest names its failure class only as pytest.fail.Exception, which the type checker cannot
# take for a class.
class CheckFailed(pytest.fail.Exception):  # type: ignore[name-defined]
    """The failure a check raises into its test where the compiler is at fault. A baseline may
    excuse this failure of a test, never another: an error of the test's own (its assertion, its
    model's error in eager) fails the test as a plain run fails it."""

    # Shown as pytest shows its own failures ("Failed: compile accuracy: ..."), which it is.
    __module__ = "builtins"
    __qualname__ = "Failed"


DEFAULT_TOLERANCE = 1e-4
TRAINING_TOLERANCE = 1e-3
"""For checks of a training step: gradients sum over the batch, and the error that compiled
forward code's (correct) rounding leaves in saved activations grows through the backward, as
PyTorch's own training accuracy runs allow for (tolerance 1e-3 and up)."""


@dataclass(frozen=True)
class Comparison:
    leaves: list[LeafResult]
    structure_error: str | None = None

    @property
    def passed(self) -> bool:
        return self.structure_error is None and all(leaf.passed for leaf in self.leaves)

    @property
    def failing(self) -> list[LeafResult]:
        return [leaf for leaf in self.leaves if not leaf.passed]

    @property
    def failing_by_fp64_rule(self) -> list[str]:
        """The paths of the outputs that fail by the fp64 rule: those a second legitimate
        evaluation's error can overturn (a failure of another rule it cannot)."""
        return [leaf.path for leaf in self.failing if leaf.rule == LeafRule.FP64]

    @property
    def fails_only_in_non_float(self) -> bool:
        """Some output fails, and each failing one is non-floating (an integer or bool output,
        judged by the rule :attr:`LeafRule.EXACT`, or one eager gives so that compiled code gives in another
        dtype, whose values its repro judges after a fix of the dtype): no floating output is
        wrong."""
        return bool(self.failing) and all(
            leaf.rule == LeafRule.EXACT
            or (leaf.rule == LeafRule.METADATA and _non_floating(leaf.dtype))
            for leaf in self.failing
        )

    @property
    def inconclusive(self) -> list[LeafResult]:
        """The outputs that passed as inconclusive (:attr:`LeafRule.INCONCLUSIVE`)."""
        return [leaf for leaf in self.leaves if leaf.rule == LeafRule.INCONCLUSIVE]

    @property
    def worst_ratio(self) -> float | None:
        ratios = [leaf.ratio for leaf in self.leaves if leaf.ratio is not None]
        return max(ratios) if ratios else None


def _non_floating(dtype: str) -> bool:
    """Whether a leaf's dtype (``int8``, ``torch.bool``...) is an integer or bool one."""
    return dtype.removeprefix("torch.").startswith(("int", "uint", "bool"))


_POISONING_ERRORS = (
    "CUDA error",
    "illegal memory access",
    "device-side assert",
    "AcceleratorError",
)


def leaves_device_unusable(error_text: str) -> bool:
    """Whether an error is one after which the process's CUDA context is unusable (a child that
    saw one is replaced; a test process that did names the culprit on later failures)."""
    return any(marker in error_text for marker in _POISONING_ERRORS)


_MEMORY_ERRORS = ("can't allocate memory", "out of memory", "Cannot allocate memory")


def out_of_memory(error: BaseException | None) -> bool:
    """Whether ``error``, or an error it was raised from, is memory exhaustion: Python's
    ``MemoryError``, torch's ``OutOfMemoryError`` (a GPU's), or a host allocator's failure
    (``DefaultCPUAllocator: can't allocate memory``)."""
    seen: set[int] = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        if isinstance(error, MemoryError) or type(error).__name__ == "OutOfMemoryError":
            return True
        if any(marker in str(error) for marker in _MEMORY_ERRORS):
            return True
        error = error.__cause__ or error.__context__
    return False
