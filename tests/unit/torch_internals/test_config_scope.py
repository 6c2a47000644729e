"""Reading and scoping Inductor's config leaves it as the user set it: a repro's assignments are
undone without writing any key back, and a batch of implication-aware values (torch 2.15) is
stated one assignment a line."""

from __future__ import annotations

import warnings

import pytest
import torch._inductor.config as inductor_config_module

from pytest_torchcompile.judging.isolation.process_setup import config_patches
from pytest_torchcompile.torch_internals.config import (
    inductor_config_source,
    with_inductor_config_undone,
)


def user_set_keys() -> set[str]:
    return {
        name
        for name in inductor_config_module.get_config_copy()
        if not inductor_config_module._is_default(name)
    }


def set_like_a_repro() -> None:
    inductor_config_module.fallback_random = True
    inductor_config_module.cpp.simdlen = 8


def test_a_repros_assignments_are_undone_and_no_key_becomes_the_users() -> None:
    before_keys, before_source = user_set_keys(), inductor_config_source()
    with warnings.catch_warnings():
        # A key written back that torch deprecates (2.15: use_mixed_mm) would warn here.
        warnings.simplefilter("error")
        with_inductor_config_undone(set_like_a_repro)
    assert user_set_keys() == before_keys
    assert inductor_config_source() == before_source
    assert inductor_config_module.fallback_random is False


def test_the_runs_result_and_errors_come_back() -> None:
    assert with_inductor_config_undone(lambda: 7) == 7
    with pytest.raises(ZeroDivisionError):
        with_inductor_config_undone(lambda: [set_like_a_repro(), 1 / 0])
    assert inductor_config_module.fallback_random is False


def test_a_batch_of_implication_aware_values_becomes_one_assignment_each(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    batch = "torch._inductor.config.load_config({'fallback_random': True, 'cpp.simdlen': 8})"
    monkeypatch.setitem(vars(inductor_config_module), "codegen_config", lambda: batch)
    with inductor_config_module.patch({"fallback_random": True, "cpp.simdlen": 8}):
        source = inductor_config_source()
    assert source.splitlines() == [
        "torch._inductor.config.fallback_random = True",
        "torch._inductor.config.cpp.simdlen = 8",
    ]
    assert config_patches(source) == {"fallback_random": True, "cpp.simdlen": 8}
