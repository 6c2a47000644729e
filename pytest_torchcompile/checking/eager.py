"""The eager runs of a check: each on a fresh copy, seeded alike, and eager's baseline, with
its own spread where two of its runs on the same inputs disagree."""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import torch

from pytest_torchcompile.checking.outcome import CheckOutcome, EagerRunError
from pytest_torchcompile.checking.runs import (
    copy_callable,
    describe,
    execute,
    judged_results,
    mutated_positions,
    released,
)
from pytest_torchcompile.common.settings import CheckOptions
from pytest_torchcompile.common.verdict import Status, out_of_memory
from pytest_torchcompile.judging.conditioning import nudged as nudged_value
from pytest_torchcompile.judging.judge import error_signature
from pytest_torchcompile.judging.oracle import differing_leaves, first_disagreement, flatten_outputs
from pytest_torchcompile.judging.references import UNLIKE_FILLS, holds_nan
from pytest_torchcompile.judging.reordering import Arguments
from pytest_torchcompile.judging.seeding import rng_states
from pytest_torchcompile.torch_internals.nan_gradients import nan_gradients_filled
from pytest_torchcompile.torch_internals.unwritten import filling_unwritten
from pytest_torchcompile.torch_internals.values import tree_map


class EagerRuns:
    """The eager runs of one check: each on a fresh copy of the model, seeded before it (as the
    compiled and fp64 runs are: random ops draw alike in each), with memory no op wrote filled,
    so that the results depending on it can be found and left out."""

    def __init__(self, fn: Callable[..., Any], options: CheckOptions) -> None:
        self.fn, self.options = fn, options
        self.allocated: list[int] = []
        self.deterministic = False
        """Whether the runs take deterministic kernels (see :func:`_deterministic_kernels`)."""

    def run(
        self,
        arguments: Arguments,
        fill: float = UNLIKE_FILLS[0],
        nan_gradients: tuple[float, list[int]] | None = None,
        nudged: int | None = None,
    ) -> tuple[dict[str, Any], list[Any]]:
        """One eager run; ``nan_gradients``: the fill of gradients at NaN values, and the list of
        what was so filled (:func:`nan_gradients_filled`); ``nudged``: the seed of a run whose
        floating inputs and weights are each moved by a unit in the last place
        (:func:`conditioning.nudged`). Buffers are left as they are: constants such as RoPE's
        inverse frequencies, which no compiled code rounds otherwise, amplify a nudge (by the
        position, there) far beyond any rounding: Qwen2's keys in bf16 moved 13 times eager's
        error, and hid a matmul lowering scaled by 1.01 (H200)."""
        torch.manual_seed(self.options.seed)
        model = copy_callable(self.fn)
        if nudged is not None:
            generator = torch.Generator().manual_seed(nudged)
            arguments = tree_map(lambda value: nudged_value(value, generator), arguments)
            weights = model.parameters() if isinstance(model, torch.nn.Module) else []
            with torch.no_grad():
                for tensor in weights:
                    tensor.copy_(nudged_value(tensor, generator))
        with (
            filling_unwritten(fill, self.allocated),
            _deterministic_kernels() if self.deterministic else contextlib.nullcontext(),
        ):
            parts, call_args = execute(
                model if nan_gradients is None else nan_gradients_filled(model, *nan_gradients),
                model if isinstance(model, torch.nn.Module) else None,
                arguments,
                self.options,
            )
        return released(parts, model), call_args

    def unwritten(
        self, arguments: Arguments, eager: tuple[dict[str, Any], list[Any]], mutated: list[int]
    ) -> dict[str, torch.Tensor] | None:
        """The elements of ``eager``'s results that depend on memory no op wrote: where a run
        with that memory filled otherwise differs."""
        if not self.allocated:
            return None
        parts, call_args = self.run(arguments, UNLIKE_FILLS[1])
        filled, filled_unlike = (
            judged_results(*eager, mutated),
            judged_results(parts, call_args, mutated),
        )
        return {
            path: mask
            for root in filled
            for path, mask in differing_leaves(filled[root], filled_unlike[root], root).items()
        }

    def nan_dependent_gradients(
        self, arguments: Arguments, eager: tuple[dict[str, Any], list[Any]]
    ) -> dict[str, torch.Tensor] | None:
        """The elements of ``eager``'s gradients that depend on a value its forward computed as
        NaN: where two runs that fill the gradients at NaN values unlike differ (eager's kernels
        give those no one value). None without a gradient, or where no NaN requires grad; nothing
        is run where no NaN is among the arguments and ``eager``'s results
        (:func:`nan_dependent_gradients` says why)."""
        if not self.options.backward or self.options.steps:
            return None
        values = [*flatten_outputs((arguments, eager[0]), "values")]
        if not holds_nan([value for _, value in values]):
            return None
        runs = []
        for fill in UNLIKE_FILLS:
            filled: list[int] = []
            runs.append(self.run(arguments, nan_gradients=(fill, filled))[0])
            if not filled:
                return None
        first, second = runs
        return differing_leaves(first["grad"], second["grad"], "grad")


@dataclass
class Baseline:
    """Eager's first run, which every later step compares with."""

    parts: dict[str, Any]
    call_args: list[Any]
    mutated: list[int]
    draws_random: bool
    spread: Spread | None = None
    """Where eager disagrees with itself, deterministic kernels too: its second run."""


@dataclass
class Spread:
    """Eager runs on the same inputs that disagree with the first beyond the tolerance, the
    generators seeded alike: how far eager's own results move from run to run, each as
    legitimate an evaluation as the first, so compiled code (which calls the same kernels) is
    measured against the largest of their errors too."""

    runs: list[tuple[dict[str, Any], list[Any]]]
    where: str
    """The first result where eager's first two runs differ beyond the tolerance."""
    settled: bool
    """Whether deterministic kernels agree with themselves (they are then eager's baseline)."""
    cause: str


def spread_note(spread: Spread) -> str:
    return (
        f"eager disagrees with itself across two runs on the same inputs at {spread.where} "
        f"({spread.cause})"
    )


def eager_sets(
    eager: EagerRuns, sets: list[Arguments], baseline: Baseline, unjudged_sizes: list[str]
) -> tuple[list[Arguments], list[tuple[dict[str, Any], list[Any]]]]:
    """The input sets to judge and eager's run on each (the given set's is the baseline's). A size
    ``dynamic=True`` grew the batch to is the check's choice, not the test's: where eager raises
    there (a model that takes one batch size), it is left out, with a note in ``unjudged_sizes``;
    where eager raises at a size the test gave (``sizes=``), the model raised eagerly."""
    kept, runs = [sets[0]], [(baseline.parts, baseline.call_args)]
    for arguments in sets[1:]:
        try:
            runs.append(eager.run(arguments))
        except Exception as error:
            signature = error_signature(error, max_chars=300)
            if eager.options.sizes is not None:
                raise EagerRunError(
                    f"the model raised when run eagerly at {describe(arguments)}: {signature}"
                ) from error
            unjudged_sizes.append(
                f"not judged at {describe(arguments)}, a batch size dynamic=True grows to: "
                f"eager raises there ({signature})"
            )
            continue
        kept.append(arguments)
    return kept, runs


def eager_baseline(
    eager: EagerRuns, given: Arguments, options: CheckOptions
) -> Baseline | CheckOutcome:
    """Eager's first run, and a second on the same inputs, compared; where they disagree, two
    more with deterministic kernels, the first of which is then the baseline, every run kept as
    a measure of eager's own spread (:class:`Spread`). The outcome instead where eager runs out
    of memory. No disagreement fails the check: compiled code is judged against the spread."""
    torch.manual_seed(options.seed)
    seeded = rng_states()
    settled = True
    try:
        parts, call_args = eager.run(given)
        draws_random = any(
            not torch.equal(a, b) for a, b in zip(seeded, rng_states(), strict=False)
        )
        runs = [eager.run(given)]
        unstable = _disagreement(parts, runs[0][0], options)
        if unstable is not None:
            # A GPU convolution's weight gradient accumulates in an order that changes from run
            # to run (timm's inception_v3 in training, H200; cuDNN's backward of torchvision's
            # deeplabv3 in training, which draws random numbers too, seeded alike in each run):
            # deterministic kernels are as legitimate an eager, and two of their runs agree.
            runs.insert(0, (parts, call_args))
            eager.deterministic = True
            parts, call_args = eager.run(given)
            runs.append(eager.run(given))
            settled = _disagreement(parts, runs[-1][0], options) is None
    except Exception as error:
        if out_of_memory(error):
            return CheckOutcome(
                Status.OUT_OF_MEMORY,
                f"the eager run ran out of memory: {error_signature(error, max_chars=300)}",
                error=error,
            )
        raise EagerRunError(
            f"the model raised when run eagerly: {error_signature(error, max_chars=300)}"
        ) from error
    spread = None
    if unstable is not None:
        cause = (
            "deterministic kernels agree: a kernel's order of accumulation"
            if settled
            else "deterministic kernels too, "
            + (
                "though it draws its random numbers seeded alike in each run"
                if draws_random
                else "and it draws no random numbers from torch's generators"
            )
            + ": a kernel without a deterministic form, or state a call changes (a global, an "
            "attribute, a generator of its own)"
        )
        spread = Spread(runs, unstable, settled, cause)
    return Baseline(parts, call_args, mutated_positions(given[0], call_args), draws_random, spread)


def _disagreement(
    parts: dict[str, Any], again: dict[str, Any], options: CheckOptions
) -> str | None:
    """Where two eager runs' results differ beyond the tolerance, or None."""
    return next(
        (
            where
            for root in parts
            if (where := first_disagreement(parts[root], again[root], options.tolerance, root))
        ),
        None,
    )


@contextlib.contextmanager
def _deterministic_kernels() -> Iterator[None]:
    """Deterministic algorithms for the block, cuDNN's among them (an op with none runs as it
    would, its warning kept from the test), the flags put back after it."""
    cudnn = torch.backends.cudnn.deterministic
    algorithms, warn_only = (
        torch.are_deterministic_algorithms_enabled(),
        torch.is_deterministic_algorithms_warn_only_enabled(),
    )
    try:
        torch.backends.cudnn.deterministic = True
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.use_deterministic_algorithms(True, warn_only=True)
            yield
    finally:
        torch.backends.cudnn.deterministic = cudnn
        torch.use_deterministic_algorithms(algorithms, warn_only=warn_only)
