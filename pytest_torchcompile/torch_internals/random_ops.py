"""Which op calls draw random numbers: those of ops torch tags ``nondeterministic_seeded``, but
a dropout of probability 0 or outside training, which draws nothing (an attention in a model's
training mode whose dropout is 0, as most language models' are). Torch only: full repro files
embed it, through ``judging/seeding.py``."""

from __future__ import annotations

import operator
from collections.abc import Sequence
from typing import Any

import torch
import torch.fx


def is_random_op(target: Any) -> bool:
    """Whether an FX node target is an op that may draw random numbers (Inductor's RNG differs
    from eager's); no op is on a torch without the tag (``random_tag_missing``)."""
    tag = getattr(torch.Tag, "nondeterministic_seeded", None)
    return tag is not None and tag in getattr(target, "tags", ())


def draws_random_numbers(
    target: Any, args: Sequence[Any] = (), kwargs: dict[str, Any] | None = None
) -> bool:
    """Whether a call of ``target`` with these arguments draws random numbers: a random op's
    (:func:`is_random_op`) but a dropout's (``native_dropout``, the attentions' ``dropout_p``) of
    probability 0 or with training off. Such a call computes eager's values in fp64 and in
    compiled code alike, and replaying its results (as a random op's are) would hand the fp64
    run eager's values: a flash attention's log-sum-exp, judged against them, deviated."""
    if not is_random_op(target):
        return False
    schema = getattr(target, "_schema", None)
    if schema is None:
        return True
    given = _arguments_given(schema, args, kwargs)
    dropout = "dropout_p" if "dropout_p" in given else "p" if "train" in given else None
    if dropout is None:
        return True
    probability, training = given[dropout], given.get("train", True)
    return not (training is False or (isinstance(probability, int | float) and probability == 0))


def _arguments_given(
    schema: Any, args: Sequence[Any], kwargs: dict[str, Any] | None
) -> dict[str, Any]:
    """Every argument of a call by its name in the op's ``schema``, defaults included."""
    given = {
        argument.name: argument.default_value
        for argument in schema.arguments
        if argument.has_default_value()  # a graph's call leaves them out: dropout_p=0.0
    }
    given.update(zip((argument.name for argument in schema.arguments), args, strict=False))
    given.update(kwargs or {})
    return given


GENERATOR_STATE = frozenset({"philox_seed", "philox_offset", "rng_state"})
"""The results of a random op that are the state of the generator it drew from (an attention's
philox seed and offset, kept for its backward): no values of the computation. Eager and compiled
code read them from generators in other states, even where the dropout is 0."""


def generator_state_outputs(gm: Any) -> list[int]:
    """The positions of a graph's outputs that are a random op's :data:`GENERATOR_STATE`, which
    are not judged; none for a callable that is not a graph."""
    graph = getattr(gm, "graph", None)
    if graph is None:
        return []
    (returned,) = [node.args[0] for node in graph.nodes if node.op == "output"]
    return [
        position
        for position, node in enumerate(returned if isinstance(returned, list | tuple) else ())
        if _is_generator_state(node)
    ]


def _is_generator_state(node: Any) -> bool:
    """Whether a graph's output is a random op's :data:`GENERATOR_STATE`."""
    if not (
        isinstance(node, torch.fx.Node)
        and node.target is operator.getitem
        and isinstance(node.args[0], torch.fx.Node)
        and isinstance(node.args[0].target, torch._ops.OpOverload)
        and is_random_op(node.args[0].target)
    ):
        return False
    returns = node.args[0].target._schema.returns
    index = node.args[1]
    return (
        isinstance(index, int) and index < len(returns) and returns[index].name in GENERATOR_STATE
    )


def random_tag_missing() -> str | None:
    """The op tag that marks random ops, where this torch lacks it."""
    return (
        None
        if hasattr(torch.Tag, "nondeterministic_seeded")
        else "torch.Tag.nondeterministic_seeded"
    )
