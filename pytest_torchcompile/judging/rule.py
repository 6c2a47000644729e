"""What a repro judges, on its own: the fp64 accuracy rule for one output tensor, and the
identity of a compile or runtime failure.

A compiled result is judged against an fp64 reference *relative to eager's own error*, as
PyTorch's ``torch._dynamo.utils.same`` does. This module needs torch, math and re only: repro
files embed it whole (its docstrings left out), so they judge exactly as the plugin does.
"""

from __future__ import annotations

import math
import re

import torch


def leaf_verdict(compiled: torch.Tensor, eager: torch.Tensor, reference: torch.Tensor | None, tol: float,
                 check_non_float: bool = True) -> tuple[bool, str, tuple[float, ...]]:
    """Whether ``compiled`` passes, by which part of the rule, and the figures it weighed.

    The tensors share a device, shape and dtype (complex ones viewed as real). ``reference`` is
    the fp64 run's value, or None for the weaker same-precision check (cosine against eager).
    Compiled may be as far from fp64 as eager is times ``same()``'s multiplier: 3 for low
    precision and small tensors, whose error rounding noise dominates, else 2.
    """
    if not compiled.is_floating_point():
        return (torch.equal(compiled, eager), "exact", ()) if check_non_float else (True, "not checked (non-floating)", ())
    if compiled.numel() == 0:
        return True, "empty", ()
    # Compiled code may stay finite where eager overflows: no failure while it matches fp64.
    if not torch.equal(*[torch.stack([t.isnan(), t == math.inf, t == -math.inf]) for t in (compiled, eager)]) and not (
            reference is not None and bool(compiled.isfinite().all()) and bool(reference.isfinite().all())
            and torch.allclose(reference.to(compiled.dtype), compiled, atol=4e-2, rtol=4e-2)):
        return False, "non-finite pattern", ()
    if torch.allclose(compiled, eager, atol=tol, rtol=tol, equal_nan=True):
        return True, "allclose", ()
    finite = compiled.isfinite() & eager.isfinite()
    if reference is None:
        cosine = float(torch.nn.functional.cosine_similarity(
            compiled[finite].double().flatten(), eager[finite].double().flatten(), dim=0, eps=1e-6))
        return cosine >= 0.99, "cosine vs eager (no fp64 reference)", (cosine,)
    finite &= reference.isfinite()
    errors = [float(torch.sqrt(torch.mean(torch.square(reference[finite].double() - value[finite].double()))))
              for value in (compiled, eager)]
    small = eager.numel() < 1000 or (eager.dim() == 4 and eager.shape[-1] == eager.shape[-2] == 1) or tol >= 2e-2
    multiplier = 3.0 if eager.dtype in (torch.float16, torch.bfloat16) or small else 2.0
    return errors[0] <= multiplier * errors[1] + tol / 10.0, "fp64 rmse", (*errors, multiplier)


def error_signature(error: BaseException, max_chars: int | None = None) -> str:
    """``Type: first line of the message`` (its first ``max_chars``); the identity of a compile
    or runtime failure. A message that carries the traceback of an error raised in another
    process (Inductor's compile workers) stands for that error, named by its traceback's
    exception line: one compile failure then has one identity, whether a worker compiled the
    kernel or this process did (the workers' pool is not always up). A traceback names a class
    with its module (``torch._inductor.exc.CppCompileError``), this process by its name alone."""
    lines = str(error).strip().splitlines()
    headers = [index for index, line in enumerate(lines) if line.startswith("Traceback (most recent call last):")]
    if headers:
        raised = [line for line in lines[headers[-1] + 1:] if line and not line[0].isspace()]
        if raised:
            unqualified = re.sub(r"^(?:\w+\.)+(?=\w+(?::|$))", "", raised[0])
            return f"{type(error).__name__}: {unqualified[:max_chars]}"
    return f"{type(error).__name__}: {lines[0][:max_chars] if lines else ''}"


def normalized_error(signature: str) -> str:
    """A signature without what changes between two compiles of one failure: file paths (Inductor
    names generated modules by content hash), addresses and numbers."""
    without_paths = re.sub(r"(?:[A-Za-z]:)?(?:[/\\][^\s/\\'\"]+)+", "PATH", signature)
    return re.sub(r"0x[0-9a-fA-F]+|\d+", "N", without_paths)
