"""One run of a model as a check makes it: on copies of the model and its arguments (widened
to fp64 on request), with its gradients or optimizer steps, and what of it is judged; the
input sets a check runs on, and the fp64 reference run."""

from __future__ import annotations

import contextlib
import copy
import functools
from collections.abc import Callable, Sequence
from typing import Any

import torch

from pytest_torchcompile.common.settings import CheckOptions
from pytest_torchcompile.common.verdict import out_of_memory
from pytest_torchcompile.judging.copies import strided_copy, widened
from pytest_torchcompile.judging.judge import error_signature
from pytest_torchcompile.judging.mutation import changed
from pytest_torchcompile.judging.oracle import flatten_outputs
from pytest_torchcompile.judging.reordering import Arguments
from pytest_torchcompile.torch_internals.fp64 import float64_everywhere
from pytest_torchcompile.torch_internals.rng import (
    RandomDrawMismatch,
    recording_random_draws,
    replaying_random_draws,
)
from pytest_torchcompile.torch_internals.values import tree_map


def _clone_tree(value: Any) -> Any:
    return tree_map(
        lambda leaf: (
            strided_copy(leaf).requires_grad_(leaf.requires_grad)
            if isinstance(leaf, torch.Tensor)
            else copy.deepcopy(leaf)
        ),
        value,
    )


def to_fp64(value: Any) -> Any:
    return tree_map(widened, value)


def copy_callable(fn: Callable[..., Any], fp64: bool = False) -> Callable[..., Any]:
    """A deep copy of a module (cast to fp64 on request); plain functions are used as they are."""
    if isinstance(fn, torch.nn.Module):
        if not fp64:
            return copy.deepcopy(fn)
        # Parameters widened as they are copied (as Parameter.__deepcopy__ copies them): an fp32
        # copy cast afterwards would hold the weights in both precisions at once.
        memo: dict[int, Any] = {
            id(p): torch.nn.Parameter(p.data.to(torch.float64), p.requires_grad)
            for p in fn.parameters()
            if type(p) is torch.nn.Parameter and p.is_floating_point()
        }
        return copy.deepcopy(fn, memo).to(torch.float64)
    return fn


def released(parts: dict[str, Any], model: Callable[..., Any]) -> dict[str, Any]:
    """``parts``, the results of a run of a module's copy, each tensor detached in place from
    the autograd graph that made it: that graph holds the copy's weights (and what a backward
    would read), which nothing judged needs, and would keep them alive beside the next copy.
    In place, since results may sit in any object; a view cannot be, and keeps its graph."""
    if isinstance(model, torch.nn.Module):
        for _, leaf in flatten_outputs(parts):
            if isinstance(leaf, torch.Tensor) and leaf.grad_fn is not None:
                with contextlib.suppress(RuntimeError):
                    leaf.detach_()
    return parts


def _loss(output: Any, loss_fn: Callable[[Any], torch.Tensor] | None) -> torch.Tensor:
    """The user's loss, or the sum of every floating output."""
    if loss_fn is not None:
        return loss_fn(output)
    leaves = [
        leaf
        for _, leaf in flatten_outputs(output)
        if isinstance(leaf, torch.Tensor) and leaf.is_floating_point() and leaf.requires_grad
    ]
    if not leaves:
        raise ValueError("backward=True needs a floating output that requires grad")
    return torch.stack([leaf.float().sum() for leaf in leaves]).sum()


def _trainable(module: torch.nn.Module | None) -> list[tuple[str, torch.Tensor]]:
    if module is None:
        return []
    return [(name, p) for name, p in module.named_parameters() if p.requires_grad]


def execute(
    call: Callable[..., Any],
    module: torch.nn.Module | None,
    arguments: Arguments,
    options: CheckOptions,
) -> tuple[dict[str, Any], list[Any]]:
    """Run once on clones of the arguments. Returns what is judged, by kind ("out", "grad",
    "param"), and the positional arguments as the call left them (in-place mutations)."""
    args = [_clone_tree(a) for a in arguments[0]]
    kwargs = {k: _clone_tree(v) for k, v in arguments[1].items()}
    if options.steps:
        return _stepped(call, module, args, kwargs, options), args
    if not options.backward:
        return {"out": call(*args, **kwargs)}, args
    return _with_gradients(call, module, args, kwargs, options), args


def _stepped(
    call: Callable[..., Any],
    module: torch.nn.Module | None,
    args: list[Any],
    kwargs: dict[str, Any],
    options: CheckOptions,
) -> dict[str, Any]:
    """The output of the last of ``options.steps`` optimizer steps, and the weights after it."""
    optimizer = torch.optim.SGD([p for _, p in _trainable(module)], lr=options.lr)
    with torch.enable_grad():
        for _ in range(options.steps):
            optimizer.zero_grad()
            output = call(*args, **kwargs)
            _loss(output, options.loss_fn).backward()
            optimizer.step()
    return {"out": output, "param": {n: p.detach() for n, p in _trainable(module)}}


def _with_gradients(
    call: Callable[..., Any],
    module: torch.nn.Module | None,
    args: list[Any],
    kwargs: dict[str, Any],
    options: CheckOptions,
) -> dict[str, Any]:
    """The output, and the gradients of the loss with respect to the trainable parameters and
    the arguments that require grad."""
    with torch.enable_grad():
        output = call(*args, **kwargs)
        targets = _trainable(module) + [
            (name, a) for name, a in _named_arguments(args, kwargs) if a.requires_grad
        ]
        grads = torch.autograd.grad(
            _loss(output, options.loss_fn), [t for _, t in targets], allow_unused=True
        )
    # No gradient and a zero gradient are one: compiled code gives zeros where eager gives None
    # (AOT autograd's backward covers every input of the graph, outputs the loss leaves out
    # included: GoogLeNet's auxiliary heads in train mode), as PyTorch's accuracy runs treat them.
    return {
        "out": output,
        "grad": {
            n: torch.zeros_like(t) if g is None else g
            for (n, t), g in zip(targets, grads, strict=True)
        },
    }


def _named_arguments(args: Sequence[Any], kwargs: dict[str, Any]) -> list[tuple[str, torch.Tensor]]:
    """The tensor arguments of a call, by the names their gradients are reported under."""
    named = [(f"args[{i}]", a) for i, a in enumerate(args)] + [
        (f"kwargs[{k!r}]", v) for k, v in kwargs.items()
    ]
    return [(name, value) for name, value in named if isinstance(value, torch.Tensor)]


def differentiable(
    fn: Callable[..., Any], arguments: Arguments, options: CheckOptions
) -> tuple[Arguments, str]:
    """The arguments a gradient check differentiates with respect to, and a note saying which.

    ``backward=True`` on a model with no trainable parameter and no input that requires grad
    means the gradients with respect to its floating inputs (as PyTorch's accuracy runs take
    them): those inputs are made to require grad, on detached aliases, so the caller's tensors
    are left as they are."""
    if not options.backward or options.steps or _differentiates(fn, arguments):
        return arguments, ""
    chosen = [name for name, a in _named_arguments(*arguments) if a.is_floating_point()]
    if not chosen:
        raise ValueError(
            "backward=True needs trainable parameters, inputs that require grad, or floating "
            "inputs to differentiate with respect to; this call has none"
        )

    def promoted(value: Any) -> Any:
        if isinstance(value, torch.Tensor) and value.is_floating_point():
            return value.detach().requires_grad_()
        return value

    return (
        (
            tuple(promoted(a) for a in arguments[0]),
            {k: promoted(v) for k, v in arguments[1].items()},
        ),
        f"backward=True with nothing requiring grad: gradients taken with respect to the floating "
        f"inputs {', '.join(chosen)}",
    )


def _differentiates(fn: Callable[..., Any], arguments: Arguments) -> bool:
    """Whether a call has something to differentiate with respect to of its own: a trainable
    parameter, or an argument that requires grad."""
    module = fn if isinstance(fn, torch.nn.Module) else None
    return bool(_trainable(module)) or any(a.requires_grad for _, a in _named_arguments(*arguments))


def unjudgeable_input(
    fn: Callable[..., Any], args: Sequence[Any], kwargs: dict[str, Any]
) -> str | None:
    """Why the check cannot judge a call given these inputs, or None: a tensor not laid out in
    strided memory (sparse, mkldnn, jagged) among the arguments or the model's weights, which the
    copies, comparisons and fp64 widening of a check do not support (``torch.equal`` raises on a
    sparse tensor), or a meta tensor, which holds no values."""
    named: list[tuple[str, Any]] = [(f"args[{index}]", arg) for index, arg in enumerate(args)]
    named += [(f"kwargs[{key!r}]", value) for key, value in kwargs.items()]
    if isinstance(fn, torch.nn.Module):
        named += [*fn.named_parameters(), *fn.named_buffers()]
    found: list[tuple[str, str]] = []
    for name, value in named:
        tree_map(functools.partial(_note_unjudgeable, found, name), value)
    if not found:
        return None
    name, why = found[0]
    return f"{name} holds {why}; the model ran eagerly"


def _note_unjudgeable(found: list[tuple[str, str]], name: str, leaf: Any) -> Any:
    if isinstance(leaf, torch.Tensor) and leaf.layout != torch.strided:
        found.append((name, f"a tensor of layout {leaf.layout}, which the check cannot compare"))
    elif isinstance(leaf, torch.Tensor) and leaf.device.type == "meta":
        found.append((name, "a meta tensor, which holds no values to compare"))
    return leaf


def mutated_positions(original: Sequence[Any], after: Sequence[Any]) -> list[int]:
    """Positions of the tensor arguments that the eager call changed in place."""
    return [
        index
        for index, (before, now) in enumerate(zip(original, after, strict=True))
        if isinstance(before, torch.Tensor)
        and isinstance(now, torch.Tensor)
        and changed(before, now)
    ]


def judged_results(
    parts: dict[str, Any], call_args: Sequence[Any], mutated: list[int]
) -> dict[str, Any]:
    """What a call produced, with the arguments it mutated (those must match too)."""
    return {**parts, **{f"args[{i}] (mutated in place)": call_args[i] for i in mutated}}


def _grown(value: Any, batch: int, size: int) -> Any:
    """``value`` with its leading (batch) dimension grown from ``batch`` to ``size`` by repetition."""
    if isinstance(value, torch.Tensor) and value.dim() > 0 and value.shape[0] == batch:
        repeats = [-(-size // batch)] + [1] * (value.dim() - 1)
        return value.detach().repeat(*repeats)[:size].clone().requires_grad_(value.requires_grad)
    return value


def input_sets(arguments: Arguments, options: CheckOptions) -> list[Arguments]:
    """The arguments to check: the given ones, then ``options.sizes`` or, with ``dynamic=True``,
    the same arguments with the batch dimension grown (a bug may hide at another size)."""
    if options.sizes is not None:
        return [arguments] + [(tuple(extra), arguments[1]) for extra in options.sizes]
    tensors = [a for a in arguments[0] if isinstance(a, torch.Tensor) and a.dim() > 0]
    if not options.dynamic or not tensors:
        return [arguments]
    batch = int(tensors[0].shape[0])
    return [arguments] + [
        _grown_set(arguments, batch, size) for size in (2 * batch + 1, 4 * batch + 3)
    ]


def _grown_set(arguments: Arguments, batch: int, size: int) -> Arguments:
    """Every argument with its batch dimension grown from ``batch`` to ``size`` (:func:`_grown`)."""
    return (
        tuple(_grown(a, batch, size) for a in arguments[0]),
        {k: _grown(v, batch, size) for k, v in arguments[1].items()},
    )


def describe(arguments: Arguments) -> str:
    shapes = [
        list(a.shape)
        for a in (*arguments[0], *arguments[1].values())
        if isinstance(a, torch.Tensor)
    ]
    return f"input sizes {shapes}"


def fp64_reference(
    fn: Callable[..., Any],
    arguments: Arguments,
    options: CheckOptions,
    mutated: list[int],
    model_draws_random: bool,
) -> tuple[dict[str, Any] | None, str]:
    """The fp64 run's results, or None (with the label of the weaker check) when it cannot run.
    A model that draws random numbers is run once more eagerly to record its draws, which the
    fp64 run replays: in fp64, some ops draw other numbers (``torch.rand``, CUDA's generators)."""
    widened: Arguments = to_fp64(arguments)
    draws: list[tuple[Any, Any]] = []
    if model_draws_random:
        torch.manual_seed(options.seed)
        model = copy_callable(fn)
        with recording_random_draws(draws):
            execute(
                model, model if isinstance(model, torch.nn.Module) else None, arguments, options
            )
    torch.manual_seed(options.seed)
    try:
        with (
            float64_everywhere(),
            replaying_random_draws(draws) if model_draws_random else contextlib.nullcontext(),
        ):
            model = copy_callable(fn, fp64=True)
            parts, call_args = execute(
                model, model if isinstance(model, torch.nn.Module) else None, widened, options
            )
            parts = released(parts, model)
    except RandomDrawMismatch as error:
        return (
            None,
            f"same-precision cosine check: the fp64 run draws random numbers unlike eager ({error})",
        )
    except Exception as error:
        # Eager's and the compiled results fit where the fp64 ones do not: they are still judged.
        cause = (
            f"the fp64 reference does not fit in memory: the model's weights and inputs alone take "
            f"{fp64_bytes(fn, arguments) / 2**30:.2f} GiB in fp64"
            if out_of_memory(error)
            else "the model cannot run in fp64"
        )
        return (
            None,
            f"same-precision cosine check: {cause} ({error_signature(error, max_chars=300)})",
        )
    return judged_results(parts, call_args, mutated), "fp64"


def model_tensors(
    fn: Callable[..., Any], args: Sequence[Any], kwargs: dict[str, Any]
) -> list[torch.Tensor]:
    """A model's weights and buffers and its arguments' tensors (in containers too)."""
    tensors: list[torch.Tensor] = (
        list(fn.parameters()) + list(fn.buffers()) if isinstance(fn, torch.nn.Module) else []
    )
    tree_map(
        lambda leaf: tensors.append(leaf) if isinstance(leaf, torch.Tensor) else None,
        (list(args), kwargs),
    )
    return tensors


def fp64_bytes(fn: Callable[..., Any], arguments: Arguments) -> int:
    """What the model's weights and tensor inputs take once widened to fp64."""
    tensors = model_tensors(fn, arguments[0], arguments[1])
    return sum(
        t.numel() * (16 if t.is_complex() else 8)
        if t.is_floating_point() or t.is_complex()
        else t.nbytes
        for t in tensors
    )
