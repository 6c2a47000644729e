"""What each option, ini key, environment variable and keyword of the plugin takes: a value it
does not take is a usage error in one line naming the setting, the value and what it takes."""

from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import Any

import pytest

from pytest_torchcompile.common import allowed, options, settings
from pytest_torchcompile.common.allowed import check_compiler_name
from pytest_torchcompile.common.options import option
from pytest_torchcompile.common.settings import KEYWORD_ALLOWED, KEYWORDS, CheckSettings


def test_every_keyword_says_what_it_takes() -> None:
    assert set(KEYWORD_ALLOWED) == KEYWORDS
    for item in options.OPTIONS:
        if item.setting is not None:
            flag = isinstance(item.allowed, allowed.Flag)
            assert KEYWORD_ALLOWED[item.setting] is (
                settings.KEYWORD_FLAG if flag else item.allowed
            )


@pytest.mark.parametrize(
    ("name", "given"),
    [
        ("compile-accuracy-tol", "abc"),
        ("compile-accuracy-tol", "-1"),
        ("compile-accuracy-tol", "nan"),
        ("compile-accuracy-tol", "inf"),
        ("compile-accuracy-minify-timeout", "0"),
        ("compile-accuracy-minify-timeout", "-1"),
        ("compile-accuracy-minify-timeout", "nan"),
        ("compile-accuracy-minify-workers", "-1"),
        ("compile-accuracy-minify-workers", "1.5"),
        ("compile-accuracy-threads", "many"),
        ("compile-accuracy-threads", "-2"),
        ("compile-accuracy-threads", "1025"),
        ("compile-accuracy-threads", "100000"),
        ("compile-accuracy-threads", "100000000000000000000"),
        pytest.param("compile-accuracy-threads", "9" * 400, id="threads-400-digits"),
        ("compile-accuracy-minify-workers", "100000000000000000000000"),
        ("compile-accuracy-minify-timeout", "86401"),
        ("compile-accuracy-minify-timeout", "9e6"),
        ("compile-accuracy-devices", "-1"),
        ("compile-accuracy-devices", ",,,"),
        ("compile-accuracy-devices", "cuda:0"),
        ("compile-accuracy-devices", "0,,1"),
        ("compile-accuracy-devices", "0,"),
        ("compile-accuracy-devices", "0 1"),
        ("compile-accuracy-scope", "bogus"),
        ("compile-accuracy-minify", "maybe"),
        ("compile-accuracy-backend", " "),
        ("compile-accuracy-mode", ""),
        ("compile-accuracy-mode", " "),
    ],
)
def test_an_option_refuses_text_it_does_not_take(name: str, given: str) -> None:
    takes = option(name).allowed
    with pytest.raises(pytest.UsageError) as refused:
        allowed.checked(takes, given, f"--{name}")
    assert str(refused.value) == (f"--{name}: {given!r} is not allowed; expected {takes.describe}")


@pytest.mark.parametrize(
    ("name", "given", "value"),
    [
        ("compile-accuracy-tol", "1e-3", 1e-3),
        ("compile-accuracy-tol", "0", 0.0),
        ("compile-accuracy-minify-timeout", "2.5", 2.5),
        ("compile-accuracy-minify-workers", "0", 0),
        ("compile-accuracy-threads", " 3 ", 3),
        ("compile-accuracy-threads", "1024", 1024),
        ("compile-accuracy-minify-workers", "1024", 1024),
        ("compile-accuracy-minify-timeout", "86400", 86400.0),
        ("compile-accuracy-devices", " 0, 2 ", (0, 2)),
        ("compile-accuracy-devices", "", ()),
        ("compile-accuracy-scope", "marked", "marked"),
        ("compile-accuracy-minify", "off", False),
        ("compile-accuracy-mode", "default", None),
        ("compile-accuracy-mode", "max-autotune", "max-autotune"),
    ],
)
def test_an_option_reads_the_text_it_takes(name: str, given: str, value: Any) -> None:
    assert allowed.checked(option(name).allowed, given, name) == value


@pytest.mark.parametrize(
    ("keyword", "given"),
    [
        ("tol", -1),
        ("tol", "abc"),
        ("tol", math.nan),
        ("tol", True),
        ("steps", -1),
        ("steps", 1.5),
        ("steps", 1001),
        pytest.param("steps", 10**400, id="steps-400-digits"),
        ("lr", math.inf),
        pytest.param("tol", 10**400, id="tol-400-digits"),
        ("seed", 0.5),
        ("seed", 2**70),
        ("seed", 2**64),
        ("seed", -(2**63) - 1),
        ("minify_timeout", 0),
        ("minify_timeout", 9e6),
        ("minify", "maybe"),
        ("minify", "no"),
        ("minify", 1),
        ("ignore_non_float", "no"),
        ("backward", "no"),
        ("backward", 0),
        ("intermediates", "no"),
        ("fullgraph", "false"),
        ("dynamic", "yes"),
        ("loss_fn", "sum"),
        ("inductor_config", ["cpp_wrapper"]),
        ("inductor_config", {1: True}),
        ("inductor_config", {"": True}),
        ("sizes", [5]),
        ("sizes", 5),
        ("sizes", [(1,), 2]),
        ("check_str", "("),
        ("check_str", "["),
        ("check_str", 3),
        ("backend", 3),
        ("mode", 5),
        ("mode", ""),
    ],
)
def test_a_keyword_refuses_a_value_it_does_not_take(keyword: str, given: Any) -> None:
    with pytest.raises(pytest.UsageError) as refused:
        CheckSettings().replace({keyword: given}, "@pytest.mark.inductor_repro")
    assert str(refused.value) == (
        f"@pytest.mark.inductor_repro({keyword}=...): {given!r} is not allowed; "
        f"expected {KEYWORD_ALLOWED[keyword].describe}"
    )


def test_a_keyword_takes_what_its_option_takes_as_a_value() -> None:
    def loss(output: Any) -> Any:
        return output

    replaced = CheckSettings().replace(
        {"tol": 1, "steps": 2, "seed": -3, "minify": False, "loss_fn": loss, "backend": loss}
    )
    assert (replaced.tol, replaced.steps, replaced.seed, replaced.minify) == (1.0, 2, -3, False)
    assert replaced.loss_fn is loss and replaced.backend is loss
    assert CheckSettings().replace({"mode": "default", "tol": None}).mode is None


@pytest.mark.parametrize(
    ("keyword", "given"),
    [
        ("seed", 2**64 - 1),
        ("seed", -(2**63)),
        ("steps", 1000),
        ("sizes", [(1,), [2, 3]]),
        ("sizes", ((1,),)),
        ("sizes", None),
        ("check_str", "a(b|c)"),
        ("check_str", None),
        ("backward", True),
        ("inductor_config", {"cpp.simdlen": None}),
    ],
)
def test_a_keyword_takes_each_value_at_the_edge_of_what_it_takes(keyword: str, given: Any) -> None:
    assert getattr(CheckSettings().replace({keyword: given}), keyword) == given


def _config_has(name: str) -> bool:
    return name in ("cpp.simdlen", "triton.cudagraphs")


def test_an_inductor_config_name_the_installed_torch_does_not_know_is_refused() -> None:
    marker = pytest.mark.inductor_repro(inductor_config={"cpp.simdlen": 4, "no.such.key": 1}).mark
    with pytest.raises(pytest.UsageError) as refused:
        settings.marker_settings(CheckSettings(), marker, config_has=_config_has)
    assert str(refused.value) == (
        "@pytest.mark.inductor_repro(inductor_config=...): 'no.such.key' is not allowed; "
        "expected a dotted name in this torch's Inductor config"
    )
    replaced = CheckSettings().replace(
        {"inductor_config": {"triton.cudagraphs": True}}, config_has=_config_has
    )
    assert replaced.inductor_config == {"triton.cudagraphs": True}


def _refusal(name: str, value: Any) -> str | None:
    return "a bool" if name == "triton.cudagraphs" and not isinstance(value, bool) else None


@pytest.mark.parametrize("source", ["compile_accuracy", "@pytest.mark.inductor_repro"])
def test_an_inductor_config_value_not_of_its_type_is_refused(source: str) -> None:
    with pytest.raises(pytest.UsageError) as refused:
        CheckSettings().replace(
            {"inductor_config": {"cpp.simdlen": 4, "triton.cudagraphs": "yes"}},
            source,
            config_has=_config_has,
            config_refusal=_refusal,
        )
    assert str(refused.value) == (
        f"{source}(inductor_config={{'triton.cudagraphs': ...}}): 'yes' is not allowed; "
        "expected a bool"
    )
    replaced = CheckSettings().replace(
        {"inductor_config": {"triton.cudagraphs": False}},
        config_has=_config_has,
        config_refusal=_refusal,
    )
    assert replaced.inductor_config == {"triton.cudagraphs": False}


UNRECOGNIZED = (
    "InductorError: AssertionError: unrecognized config cpp.inject_relu_bug_TESTING_ONLY = "
    "'acuracy'"
)


@pytest.mark.parametrize(
    ("patches", "error", "named"),
    [
        (
            {"cpp.simdlen": 4, "cpp.inject_relu_bug_TESTING_ONLY": "acuracy"},
            UNRECOGNIZED,
            "cpp.inject_relu_bug_TESTING_ONLY",
        ),
        ({"cpp.inject_relu_bug_TESTING_ONLY": "compile_error"}, "CppCompileError: C++", None),
        ({"cpp.inject_relu_bug_TESTING_ONLY": "accuracy"}, UNRECOGNIZED, None),
        ({"cpp.simdlen": 4}, "RuntimeError: cpp.inject_relu_bug_TESTING_ONLY", None),
        ({"cpp.inject_relu_bug_TESTING_ONLY": ""}, UNRECOGNIZED, None),
    ],
)
def test_a_compile_error_naming_a_config_value_is_the_settings(
    patches: dict[str, Any], error: str, named: str | None
) -> None:
    assert allowed.refused_config_value(patches, error) == named


def test_a_config_value_the_compile_raised_on_is_named_with_its_source() -> None:
    refused = allowed.ConfigValueRefused("cpp.x", "acuracy", "InductorError: bad")
    assert refused.line("compile_accuracy") == (
        "compile_accuracy(inductor_config={'cpp.x': ...}): 'acuracy' is not allowed "
        "(compiling raised InductorError: bad); expected a value this torch's Inductor takes "
        "for it"
    )


def _names(keyword: str) -> list[str]:
    return {"backend": ["eager", "inductor"], "mode": ["default", "max-autotune"]}[keyword]


def test_a_compiler_name_the_installed_torch_does_not_know_is_refused() -> None:
    with pytest.raises(pytest.UsageError) as refused:
        CheckSettings().replace({"mode": "max-autotun"}, "@pytest.mark.inductor_repro", _names)
    assert str(refused.value) == (
        "@pytest.mark.inductor_repro(mode=...): 'max-autotun' is not allowed; "
        "expected a torch.compile mode this torch knows: default, max-autotune"
    )
    assert CheckSettings().replace({"backend": "eager"}, compiler_names=_names).backend == "eager"


def test_a_long_list_of_names_is_shown_by_the_close_ones() -> None:
    def many(keyword: str) -> list[str]:
        return [f"backend{index}" for index in range(20)] + ["inductor"]

    with pytest.raises(pytest.UsageError) as refused:
        check_compiler_name(option("compile-accuracy-backend").allowed, "inductr", "--b", many)
    assert str(refused.value) == (
        "--b: 'inductr' is not allowed; expected a torch.compile backend this torch knows "
        "(torch.compiler.list_backends(exclude_tags=()) lists them); close: inductor"
    )


def test_torch_is_not_asked_of_a_backend_that_is_a_function_or_a_default_mode() -> None:
    def unasked(keyword: str) -> list[str]:
        raise AssertionError(f"asked for {keyword}")

    replaced = CheckSettings().replace(
        {"backend": print, "mode": "default"}, compiler_names=unasked
    )
    assert replaced.backend is print and replaced.mode is None


@pytest.mark.parametrize(
    ("visible", "given", "expected"),
    [
        (2, "2", "CUDA device indices below 2, the devices visible"),
        (2, "0,7", "CUDA device indices below 2, the devices visible"),
        (0, "0", "no CUDA device index: none is visible"),
    ],
)
def test_a_device_this_machine_does_not_show_is_refused(
    visible: int, given: str, expected: str
) -> None:
    with pytest.raises(pytest.UsageError) as refused:
        allowed.checked(allowed.Devices(visible=visible), given, "--compile-accuracy-devices")
    assert str(refused.value) == (
        f"--compile-accuracy-devices: {given!r} is not allowed; expected {expected}"
    )
    assert allowed.checked(allowed.Devices(visible=visible), "", "devices") == ()
    assert allowed.checked(allowed.Devices(visible=8), given, "devices")


@pytest.mark.parametrize(
    ("name", "given", "expected"),
    [
        ("PYTEST_TORCHCOMPILE_THREADS", "100000", "an integer >= 0 and <= 1024"),
        ("PYTEST_TORCHCOMPILE_THREADS", "100000000000000000000", "an integer >= 0 and <= 1024"),
        ("PYTEST_TORCHCOMPILE_DEVICES", "0,,1", "CUDA device indices, like '0,2'"),
        ("PYTEST_TORCHCOMPILE_LEASE_S", "inf", "a finite number > 0"),
        ("PYTEST_TORCHCOMPILE_CONCURRENT_PROBE", "yes", "one of '0', '1'"),
        ("PYTEST_TORCHCOMPILE_CONCURRENT_PROBE", "2", "one of '0', '1'"),
        ("PYTEST_TORCHCOMPILE_FULL_TABLE", "no", "one of '0', '1'"),
        ("PYTEST_TORCHCOMPILE_FULL_TABLE", "false", "one of '0', '1'"),
    ],
)
def test_a_variable_it_does_not_take_is_refused_before_the_run(
    name: str,
    given: str,
    expected: str,
    pytestconfig: pytest.Config,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for variable in (
        "PYTEST_TORCHCOMPILE_THREADS",
        "PYTEST_TORCHCOMPILE_DEVICES",
        "PYTEST_TORCHCOMPILE_LEASE_S",
        "PYTEST_TORCHCOMPILE_CONCURRENT_PROBE",
        "PYTEST_TORCHCOMPILE_FULL_TABLE",
    ):
        monkeypatch.delenv(variable, raising=False)
    options.check_run_settings(pytestconfig)
    monkeypatch.setenv(name, given)
    with pytest.raises(pytest.UsageError) as refused:
        options.check_run_settings(pytestconfig)
    assert str(refused.value) == f"{name}: {given!r} is not allowed; expected {expected}"


@pytest.mark.parametrize(("given", "chosen"), [("", None), (" 1 ", "1"), ("0", "0")])
def test_the_concurrent_probe_is_read_from_the_environment(
    given: str, chosen: str | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(options.CONCURRENT_PROBE_ENV, given)
    assert options.concurrent_probe() == chosen


@pytest.mark.parametrize("given", ["abc", "0", "-1", "nan", "inf"])
def test_a_lease_it_does_not_take_is_refused(given: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(options.LEASE_ENV, given)
    with pytest.raises(pytest.UsageError) as refused:
        options.lease_s()
    assert str(refused.value) == (
        f"PYTEST_TORCHCOMPILE_LEASE_S: {given!r} is not allowed; expected a finite number > 0"
    )


def test_the_lease_is_read_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(options.LEASE_ENV, " 2.5 ")
    assert options.lease_s() == 2.5
    monkeypatch.delenv(options.LEASE_ENV)
    assert options.lease_s() == options.DEFAULT_LEASE_S


@pytest.mark.parametrize(
    ("args", "ini", "where"),
    [
        (["--compile-threads", "abc"], "", "--compile-threads"),
        (["--compile-minify-timeout", "-1"], "", "--compile-minify-timeout"),
        (["--compile-minify-workers", "x"], "", "--compile-minify-workers"),
        (["--compile-devices", "x"], "", "--compile-devices"),
        (["--compile-accuracy-threads", "abc"], "", "--compile-accuracy-threads"),
        ([], "compile_threads = abc", "ini compile_threads"),
        ([], "compile_minify_timeout = 0", "ini compile_minify_timeout"),
        ([], "compile_accuracy_threads = abc", "ini compile_accuracy_threads"),
    ],
)
def test_a_value_not_taken_is_named_as_given_under_an_old_name(
    args: list[str], ini: str, where: str, pytester: pytest.Pytester
) -> None:
    pytester.makeini(f"[pytest]\n{ini}\n")
    config = pytester.parseconfig(*args)
    with pytest.raises(pytest.UsageError) as refused:
        options.check_run_settings(config)
    assert str(refused.value).startswith(f"{where}: ")


@pytest.mark.parametrize(
    ("args", "ini", "where"),
    [
        (["--compile-mode", "max-autotun"], "", "--compile-mode"),
        (["--compile-backend", "inductr"], "", "--compile-backend"),
        ([], "compile_mode = max-autotun", "ini compile_mode"),
        ([], "compile_accuracy_mode = max-autotun", "ini compile_accuracy_mode"),
    ],
)
def test_a_compiler_name_not_known_is_named_as_given_under_an_old_name(
    args: list[str], ini: str, where: str, pytester: pytest.Pytester
) -> None:
    pytester.makeini(f"[pytest]\n{ini}\n")
    config = pytester.parseconfig(*args)

    def names(keyword: str) -> list[str]:
        return ["inductor", "default", "max-autotune"]

    with pytest.raises(pytest.UsageError) as refused:
        options.check_compiler_names(config, names)
    assert str(refused.value).startswith(f"{where}: ")


SETUP_TAKES = (
    "comma-separated modules that can be imported (package.module) or files that exist "
    "(path/to/setup.py)"
)


@pytest.mark.parametrize(
    ("given", "why"),
    [
        ("no_such_module_xyz", "no module no_such_module_xyz can be found"),
        ("json, no_such_module_xyz", "no module no_such_module_xyz can be found"),
        ("json.no_such_submodule", "no module json.no_such_submodule can be found"),
        ("pytest_torchcompile.no_such", "no module pytest_torchcompile.no_such can be found"),
        ("math.sub", "no module math.sub can be found"),
        ("not-a-module", "no module not-a-module can be found"),
        ("missing_setup.py", "no file missing_setup.py"),
        ("tools/missing_setup.py", "no file tools/missing_setup.py"),
    ],
)
def test_a_setup_module_that_cannot_be_found_is_refused_before_the_run(
    given: str, why: str, pytestconfig: pytest.Config, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(allowed.SETUP_ENV, given)
    with pytest.raises(pytest.UsageError) as refused:
        options.check_run_settings(pytestconfig)
    assert str(refused.value) == (
        f"PYTEST_TORCHCOMPILE_SETUP: {given!r} is not allowed ({why}); expected {SETUP_TAKES}"
    )


def test_setup_modules_are_found_without_being_imported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    package = tmp_path / "setup_package_never_imported"
    package.mkdir()
    (package / "__init__.py").write_text("raise AssertionError('imported')\n")
    (package / "ops.py").write_text("raise AssertionError('imported')\n")
    (tmp_path / "register.py").write_text("raise AssertionError('imported')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.chdir(tmp_path)
    given = " setup_package_never_imported.ops, register.py, json.decoder,, "
    takes = allowed.SetupModules()
    assert allowed.checked(takes, given, allowed.SETUP_ENV) == (
        "setup_package_never_imported.ops",
        "register.py",
        "json.decoder",
    )
    assert "setup_package_never_imported" not in sys.modules


@pytest.mark.parametrize("source", ["compile_accuracy", "@pytest.mark.inductor_repro"])
def test_kind_is_no_setting_a_user_can_give(source: str) -> None:
    assert "kind" not in KEYWORDS
    with pytest.raises(pytest.UsageError) as refused:
        CheckSettings().replace({"kind": "accuracy"}, source)
    assert str(refused.value) == (
        f"{source}: unknown compile-accuracy option(s) ['kind']; known: {sorted(KEYWORDS)}"
    )
