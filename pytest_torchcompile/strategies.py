"""Hypothesis strategies for PyTorch model inputs.

Draw tensors with :func:`tensors` and hand them to ``compile_accuracy``::

    from hypothesis import given
    from pytest_torchcompile.strategies import tensors

    @given(x=tensors(shape=(4, 8), dtype=[torch.float32, torch.float16]))
    def test_model(compile_accuracy, x):
        compile_accuracy(model, x)

Several positional arguments at once, as one tuple::

    @given(args=model_args(tensors(shape=(2, 8)), tensors(shape=(2, 8)), 0.5))
    def test_model(compile_accuracy, args):
        compile_accuracy(model, *args)

Arguments that must agree on a dimension are built from one drawn size::

    @given(args=batched(
        lambda b: (tensors(shape=(b, 8)), tensors(shape=(b,), dtype=torch.int64, elements=(0, 3))),
        batch=st.integers(1, 8),
    ))
    def test_loss(compile_accuracy, args):
        compile_accuracy(loss, *args)

(``st.shared(st.integers(1, 8), key="batch")`` mapped into several ``shape=`` strategies works
too.) For keyword arguments, give each one its own ``@given`` keyword, or use
``st.fixed_dictionaries``.

Whole torch programs, valid by construction, with :func:`programs` (a :class:`Program`: its
source, its inputs and the check's keywords it needs; inputs larger than a literal are built by
:func:`filled`)::

    @given(programs())
    def test_inductor(compile_accuracy, program):
        compile_accuracy(program.fn, *program.make_inputs(), **program.options)

Values stay in ranges where the arithmetic a model does stays finite, in every dtype: floats in
``[-4, 4]`` and integers in ``[-8, 8]`` (``[0, 8]`` unsigned) unless ``elements`` says otherwise.

This module is the strategies' public face; they are defined in ``pytest_torchcompile.hunting``
(``tensors``, ``drawing``, ``program``).
"""

from __future__ import annotations

from pytest_torchcompile.hunting.drawing import programs
from pytest_torchcompile.hunting.program import Program, filled
from pytest_torchcompile.hunting.tensors import (
    FLOAT_DTYPES,
    INTEGER_DTYPES,
    Layout,
    batched,
    model_args,
    shapes,
    tensors,
)

__all__ = [
    "FLOAT_DTYPES",
    "INTEGER_DTYPES",
    "Layout",
    "Program",
    "batched",
    "filled",
    "model_args",
    "programs",
    "shapes",
    "tensors",
]
