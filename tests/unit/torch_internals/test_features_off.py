"""Where a torch internal the plugin uses is gone (as in a newer torch), the feature that needs
it is named as off, with the internal, and does without it instead of raising."""

from __future__ import annotations

import types
from collections.abc import Callable, Sequence
from typing import Any

import pytest
import torch
import torch._inductor.compile_fx as compile_fx_module
import torch._inductor.config as inductor_config_module
import torch.fx
from torch._inductor import compiler_bisector, cpu_vec_isa
from torch.fx.experimental.proxy_tensor import make_fx

from pytest_torchcompile.torch_internals.availability import FeatureOff, core_missing, features_off
from pytest_torchcompile.torch_internals.bisector import (
    GRAPH_PASSES,
    bisector_config_changes,
    subsystems_skipped,
)
from pytest_torchcompile.torch_internals.compiling import probe_cpu_vector_isas, reset
from pytest_torchcompile.torch_internals.config import (
    config_values,
    inductor_config_diff,
    inductor_config_has,
    inductor_config_refusal,
)
from pytest_torchcompile.torch_internals.environment import report_environment
from pytest_torchcompile.torch_internals.interception import intercept_inductor
from pytest_torchcompile.torch_internals.ops import op_origins


def the_feature_off(start: str) -> FeatureOff:
    off = [feature for feature in features_off() if feature.feature.startswith(start)]
    assert len(off) == 1, features_off()
    assert off[0].line.startswith(
        f"{off[0].feature} is off: torch {torch.__version__} has no {off[0].internal}; "
    )
    return off[0]


def test_a_supported_torch_leaves_no_feature_off() -> None:
    assert features_off() == []
    assert report_environment()["features_off"] == []


def test_without_compile_fx_taking_an_inner_compile_plain_compiles_run_unjudged(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    original = compile_fx_module.compile_fx

    def compile_fx(
        model_: torch.fx.GraphModule, example_inputs_: Sequence[Any], **options: Any
    ) -> Any:
        return original(model_, example_inputs_, **options)  # names no inner_compile

    monkeypatch.setattr(compile_fx_module, "compile_fx", compile_fx)
    off = the_feature_off("checking plain torch.compile calls")
    assert off.internal == "torch._inductor.compile_fx.compile_fx's inner_compile argument"
    seen: list[torch.fx.GraphModule] = []

    def hook(
        gm: torch.fx.GraphModule,
        inputs: Sequence[Any],
        kwargs: dict[str, Any],
        compile_fn: Callable[[], Any],
    ) -> Any:
        seen.append(gm)
        return compile_fn()

    reset()
    x = torch.randn(4)
    with intercept_inductor(hook):
        out = torch.compile(lambda value: value.sin() + 1, backend="inductor")(x)
    reset()
    torch.testing.assert_close(out, x.sin() + 1)
    assert seen == []
    assert compile_fx_module.compile_fx is compile_fx


def entries_without(field: str) -> dict[str, Any]:
    """The Inductor config's entries as a torch keeping no ``field`` in them would have them."""
    entries: dict[str, Any] = vars(inductor_config_module)["_config"]
    return {
        name: types.SimpleNamespace(
            **{key: value for key, value in vars(entry).items() if key != field}
        )
        for name, entry in entries.items()
    }


def test_without_readable_overrides_random_config_applies_to_every_graph(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(vars(inductor_config_module), "_config", entries_without("user_override"))
    off = the_feature_off("the user's Inductor config for graphs that draw no random numbers")
    assert off.internal == "torch._inductor.config._config[name].user_override"
    assert config_values({"fallback_random": True}) == {}


def test_without_config_defaults_stage_steps_are_not_tried(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(vars(inductor_config_module), "_config", entries_without("default"))
    assert (
        the_feature_off("finding a failure's stage by setting config values back").internal
        == "torch._inductor.config._config[name].default"
    )
    assert inductor_config_has("cpp.simdlen")


def test_without_declared_config_types_values_are_left_to_the_compile(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(vars(inductor_config_module), "_config", entries_without("value_type"))
    assert (
        the_feature_off("checking the type of each inductor_config value").internal
        == "torch._inductor.config._config[name].value_type"
    )
    assert inductor_config_refusal("freezing", "yes") is None


def test_without_a_config_entry_table_the_config_is_read_from_its_copy(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    config_copy = inductor_config_module.get_config_copy()
    monkeypatch.setitem(vars(inductor_config_module), "_config", {})
    monkeypatch.setitem(vars(inductor_config_module), "get_config_copy", lambda: config_copy)
    assert (
        the_feature_off("the user's Inductor config").internal == "torch._inductor.config._config"
    )
    assert inductor_config_has("cpp.simdlen") and not inductor_config_has("no_such_value")
    assert config_values({"fallback_random": True}) == {}


def test_without_the_bisectors_subsystem_switch_stages_are_found_by_config(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delattr(compiler_bisector.CompilerBisector, "disable_subsystem")
    assert (
        the_feature_off("finding a failure's stage by switching Inductor passes").internal
        == "torch._inductor.compiler_bisector.CompilerBisector.disable_subsystem"
    )
    with subsystems_skipped(lambda backend, subsystem, what: True) as skipping:
        assert skipping is False


def test_without_the_transform_observers_check_no_pass_is_switched_off_by_name(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from torch.fx.passes.graph_transform_observer import GraphTransformObserver

    monkeypatch.delattr(GraphTransformObserver, "_check_disable_pass")
    assert (
        the_feature_off("finding a failure's stage by switching named").internal
        == "torch.fx.passes.graph_transform_observer.GraphTransformObserver._check_disable_pass"
    )
    with subsystems_skipped(lambda backend, subsystem, what: True) as skipping:
        assert skipping, "the bisector's own subsystems are still switched"
        assert "_check_disable_pass" not in vars(GraphTransformObserver)


def test_every_named_graph_pass_is_asked_about() -> None:
    asked: list[tuple[str, str]] = []
    with subsystems_skipped(
        lambda backend, subsystem, what: asked.append((subsystem, what)) is not None
    ):
        torch._dynamo.reset()
        torch.compile(lambda x: x.sin() + 1)(torch.ones(4))
    assert (GRAPH_PASSES, "remove_noop_ops") in asked


def test_without_the_bisectors_config_changes_none_are_tried(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delattr(compiler_bisector, "BACKENDS")
    assert (
        the_feature_off("finding a failure's stage by the compiler bisector's").internal
        == "torch._inductor.compiler_bisector.BACKENDS"
    )
    assert bisector_config_changes("inductor") == []


def test_without_a_lowering_table_the_fingerprint_names_it(monkeypatch: pytest.MonkeyPatch) -> None:
    import torch._inductor.decomposition as decomposition

    monkeypatch.delattr(decomposition, "decompositions")
    assert (
        the_feature_off("comparing the lowering tables").internal
        == "torch._inductor.decomposition.decompositions"
    )


def test_without_the_dispatchers_dump_an_ops_origin_is_found_otherwise(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delattr(torch._C, "_dispatch_dump")
    assert (
        the_feature_off("naming the module that registers an op").internal
        == "torch._C._dispatch_dump"
    )
    gm = make_fx(lambda x: torch.ops.prims.convert_element_type.default(x, torch.float64))(
        torch.ones(2)
    )
    assert [origin.qualname for origin in op_origins(gm)] == ["prims::convert_element_type"]


def test_without_the_vector_isa_checker_no_probe_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delattr(cpu_vec_isa, "x86_isa_checker")
    assert (
        the_feature_off("probing the CPU's vector ISAs").internal
        == "torch._inductor.cpu_vec_isa.x86_isa_checker"
    )
    probe_cpu_vector_isas()


def test_without_the_default_test_the_report_leaves_the_config_out(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # torch 2.15's implication-aware config module defines it over the base class's: take both.
    for owner in (
        cls for cls in type(inductor_config_module).__mro__ if "_is_default" in vars(cls)
    ):
        monkeypatch.delattr(owner, "_is_default")
    off = the_feature_off("the non-default Inductor config in the JSON report")
    assert inductor_config_diff() == {}
    assert report_environment()["features_off"] == [off.to_dict()]


def test_a_supported_torch_has_what_checking_needs() -> None:
    assert core_missing() is None


def test_without_compile_fx_inner_checking_names_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delattr(compile_fx_module, "compile_fx_inner")
    assert core_missing() == "torch._inductor.compile_fx.compile_fx_inner"


def test_without_the_random_tag_no_graph_is_taken_for_random(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from pytest_torchcompile.judging.seeding import draws_random
    from pytest_torchcompile.torch_internals.random_ops import is_random_op

    gm = make_fx(lambda x: (torch.rand_like(x) + x,))(torch.randn(4))
    assert draws_random(gm)
    monkeypatch.delattr(torch.Tag, "nondeterministic_seeded")

    assert (
        the_feature_off("telling graphs that draw random numbers").internal
        == "torch.Tag.nondeterministic_seeded"
    )
    assert not draws_random(gm)
    assert not any(is_random_op(node.target) for node in gm.graph.nodes)


def test_without_a_symbolic_ints_hint_one_is_taken(monkeypatch: pytest.MonkeyPatch) -> None:
    from torch.fx.experimental.sym_node import SymNode

    from pytest_torchcompile.torch_internals.values import concrete_int

    monkeypatch.delattr(SymNode, "hint")

    assert (
        the_feature_off("the sizes symbolic inputs had").internal
        == "torch.fx.experimental.sym_node.SymNode.hint"
    )
    assert concrete_int(7) == 7


def test_without_out_arguments_in_schemas_allocations_are_told_by_name(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from pytest_torchcompile.torch_internals.unwritten import filling_unwritten

    real_hasattr = hasattr

    def without_is_out(obj: Any, name: str) -> bool:
        return False if name == "is_out" else real_hasattr(obj, name)

    monkeypatch.setattr("builtins.hasattr", without_is_out)
    assert the_feature_off("telling an out= overload").internal == "an op schema's Argument.is_out"
    monkeypatch.undo()
    monkeypatch.setattr(
        "pytest_torchcompile.torch_internals.values.hasattr", without_is_out, raising=False
    )

    allocated: list[int] = []
    destination = torch.full((3,), 5.0)
    with filling_unwritten(7.0, allocated):
        fresh = torch.empty(4)
        torch.ops.aten.empty.out([3], out=destination)
    assert fresh.tolist() == [7.0] * 4 and allocated == [4]
