"""A repro's inputs keep their negative and conjugate bits: compiled code is built for the bits
its inputs had (Inductor reads a negative view's memory as it is), and a repro that wrote the
values laid out without them compiled other code, which passed where the test's failed."""

from __future__ import annotations

from pathlib import Path

import torch
from torch.fx.experimental.proxy_tensor import make_fx

from pytest_torchcompile.common.files import MINIFIED_NAME
from pytest_torchcompile.common.kinds import FailureKind
from pytest_torchcompile.judging.case import ReproCase
from pytest_torchcompile.repros.loading import load_case
from pytest_torchcompile.repros.repro import write_minified, write_repro


def affine(x: torch.Tensor, z: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    return x * 2 + 1, z * 2 + 1


def _inputs() -> list[torch.Tensor]:
    small = torch.complex(torch.linspace(-1, 1, 8), torch.linspace(1, 2, 8)).conj().imag
    large = torch.complex(torch.linspace(-1, 1, 4096), torch.linspace(1, 2, 4096)).conj()
    return [small, large]  # written inline, and to a tensor file


def _case() -> ReproCase:
    inputs = _inputs()
    return ReproCase(make_fx(affine)(*inputs), inputs, FailureKind.ACCURACY, "tests::viewed")


def _layout(value: torch.Tensor) -> tuple[object, ...]:
    return (
        value.is_neg(),
        value.is_conj(),
        value.dtype,
        tuple(value.shape),
        value.stride(),
        value.storage_offset(),
    )


def test_a_repro_file_writes_its_inputs_with_their_bits(tmp_path: Path) -> None:
    path = write_repro(_case(), tmp_path / "repro.py")
    loaded = load_case(path).inputs
    wanted = _inputs()
    assert [_layout(value) for value in loaded] == [_layout(value) for value in wanted]
    assert [_layout(value)[:2] for value in loaded] == [(True, False), (False, True)]
    assert all(torch.equal(got, value) for got, value in zip(loaded, wanted, strict=True))


def test_a_minified_repro_of_a_view_keeps_the_full_form_which_keeps_its_bits(
    tmp_path: Path,
) -> None:
    inputs = _inputs()[:1]
    case = ReproCase(
        make_fx(lambda x: (x * 2,))(*inputs), inputs, FailureKind.ACCURACY, "tests::viewed"
    )
    path = write_minified(case, tmp_path / MINIFIED_NAME)
    assert (
        "# note:    the full form, not the compact one: an input that is not a plain strided "
        "real tensor"
    ) in path.read_text()
    [loaded] = load_case(path).inputs
    assert loaded.is_neg() and torch.equal(loaded, inputs[0])
