"""The noise floors of a check that fails by the fp64 rule: the errors of other legitimate
evaluations of the model (eager on the batch reversed or in channels-last memory, Inductor's
decomposed graphs run by eager kernels), which may overturn it (:mod:`reordering`)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

import torch

from pytest_torchcompile.checking.runs import (
    copy_callable,
    execute,
    fp64_reference,
    judged_results,
    released,
    to_fp64,
)
from pytest_torchcompile.common.settings import CheckOptions
from pytest_torchcompile.judging.reordering import (
    DECOMPOSED_CAP,
    Arguments,
    capped,
    channels_last,
    noise_floors,
    raise_floors,
    reversed_batch,
)
from pytest_torchcompile.torch_internals.compiling import no_compile_caches, reset, strict_dynamo
from pytest_torchcompile.torch_internals.config import inductor_config
from pytest_torchcompile.torch_internals.decomposed import decomposed, decomposed_missing
from pytest_torchcompile.torch_internals.fp64 import float64_everywhere

EAGER_SPREAD_FLOOR = "eager run again on the same inputs, which disagrees with its first run"


DECOMPOSED_FLOOR = (
    f"Inductor's decomposed graphs run by eager kernels, which give the fp64 reference in fp64; "
    f"at most {DECOMPOSED_CAP:g}x eager's error counted"
)


def evaluation_floors(
    fn: Callable[..., Any],
    arguments: Arguments,
    options: CheckOptions,
    mutated: list[int],
    reference: dict[str, Any],
    eager_run: Callable[[Arguments], tuple[dict[str, Any], list[Any]]],
    model_draws_random: bool,
) -> dict[str, float]:
    """By output path, the largest error of the second legitimate evaluations (:mod:`reordering`:
    eager on the batch reversed, eager on channels-last inputs); run only for a check that fails
    by the fp64 rule, which they may overturn. A model that draws random numbers gets no reversed
    batch (its draws would land on other samples); its channels-last run draws as eager did, and
    its fp64 run replays those draws."""
    evaluations: list[tuple[Arguments, int | None]] = []
    if not model_draws_random and (reordered := reversed_batch(arguments)) is not None:
        evaluations.append(reordered)
    if (laid_out := channels_last(arguments)) is not None:
        evaluations.append((laid_out, None))
    floors: dict[str, float] = {}
    for evaluated_arguments, batch in evaluations:
        try:
            parts, call_args = eager_run(evaluated_arguments)
            fp64, _ = fp64_reference(fn, evaluated_arguments, options, mutated, model_draws_random)
        except Exception:  # the model may not take these arguments: no second sample, nothing lost
            continue
        if fp64 is None:
            continue
        for path, floor in noise_floors(
            judged_results(parts, call_args, mutated), fp64, reference, batch
        ).items():
            floors[path] = max(floor, floors.get(path, 0.0))
    return floors


def decomposed_floors(
    fn: Callable[..., Any],
    arguments: Arguments,
    options: CheckOptions,
    mutated: list[int],
    reference: dict[str, Any],
    eager: dict[str, Any],
) -> dict[str, float]:
    """By output path, the error from fp64 of the model run through Inductor's decompositions
    and partitioner by eager kernels (:mod:`reordering`), where the same graphs run in fp64 give
    the fp64 reference (a wrong decomposition does not), each at most ``DECOMPOSED_CAP`` times
    eager's own error (``eager``: eager's judged results). Run only for outputs that fail
    after the reordered evaluations; a model that draws random numbers gets none (the
    decomposed graphs draw otherwise). The compiles leave Dynamo as a check leaves it."""
    if decomposed_missing() is not None:
        return {}
    widened_arguments: Arguments = to_fp64(arguments)
    runs: list[dict[str, Any]] = []
    try:
        with inductor_config(options.inductor_config), no_compile_caches(), strict_dynamo():
            for fp64, evaluated in ((False, arguments), (True, widened_arguments)):
                reset()
                torch.manual_seed(options.seed)
                model = copy_callable(fn, fp64=fp64)
                with float64_everywhere() if fp64 else contextlib.nullcontext():
                    parts, call_args = execute(
                        decomposed(model, options.dynamic, fp64=fp64),
                        model if isinstance(model, torch.nn.Module) else None,
                        evaluated,
                        options,
                    )
                runs.append(judged_results(released(parts, model), call_args, mutated))
                del model, parts, call_args
    except Exception:  # the model may not compile so: no decomposed sample, nothing lost
        return {}
    finally:
        reset()
    return capped(noise_floors(runs[0], runs[1], reference, None), eager, reference)


def spread_floors(
    floors: dict[str, float],
    deciding: dict[str, str],
    runs: list[tuple[dict[str, Any], list[Any]]],
    mutated: list[int],
    reference: dict[str, Any],
) -> None:
    """``floors`` raised to the errors of eager's other runs on the same inputs (:class:`Spread`),
    each counted as deciding where it raised a floor."""
    for run in runs:
        found = noise_floors(judged_results(*run, mutated), reference, reference, None)
        raise_floors(floors, deciding, found, EAGER_SPREAD_FLOOR)
