"""The strategies' public face (pytest_torchcompile.strategies): what users import, defined in
pytest_torchcompile.hunting."""

from __future__ import annotations

import pytest_torchcompile
from pytest_torchcompile import strategies
from pytest_torchcompile.hunting import drawing, program, tensors


def test_the_package_gives_the_strategies_as_an_attribute() -> None:
    assert pytest_torchcompile.strategies is strategies
    assert "strategies" in pytest_torchcompile.__all__


def test_the_public_face_names_the_strategies_where_they_are_defined() -> None:
    assert sorted(strategies.__all__) == [
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
    for name in ("FLOAT_DTYPES", "INTEGER_DTYPES", "batched", "model_args", "shapes", "tensors"):
        assert getattr(strategies, name) is getattr(tensors, name)
    assert strategies.programs is drawing.programs
    assert (strategies.Program, strategies.filled) == (program.Program, program.filled)
