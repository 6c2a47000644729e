"""Tensors and models the judging meets rarely (float8 outputs, conjugate views as outputs and
inputs, meta tensors, jagged nested tensors, ``torch.cond``, a model that takes one batch size, a
``train()`` model's state, a count kept outside tensors): a run under ``--compile-accuracy``
decides every test as a plain run does, each check judged or ``not_judged`` with its reason,
never the plugin's error reported as the model's."""

from __future__ import annotations

import json

import pytest

pytest_plugins = ["pytester"]

SUITE = """
import copy

import torch


def to_float8(x):
    return (x * 2).to(torch.float8_e5m2)


def test_plain_float8():
    out = torch.compile(to_float8)(torch.linspace(-2, 2, 16))
    assert torch.equal(out.float(), to_float8(torch.linspace(-2, 2, 16)).float())


def test_fixture_float8(compile_accuracy):
    compile_accuracy(to_float8, torch.linspace(-2, 2, 16).to(torch.float8_e4m3fn).float())


def conjugated(z):
    return (z * 2).conj()


def test_plain_conj():
    z = torch.complex(torch.linspace(0, 1, 8), torch.linspace(1, 2, 8))
    assert torch.compile(conjugated)(z).is_conj()


def test_fixture_conj(compile_accuracy):
    compile_accuracy(conjugated, torch.complex(torch.linspace(0, 1, 8), torch.linspace(1, 2, 8)))


def affine(z):
    return z * 2 + 1


def test_plain_conj_input():
    z = torch.complex(torch.linspace(0, 1, 8), torch.linspace(1, 2, 8)).conj()
    assert torch.allclose(torch.compile(affine)(z), affine(z))


def test_fixture_conj_input(compile_accuracy):
    z = torch.complex(torch.linspace(0, 1, 8), torch.linspace(1, 2, 8)).conj()
    assert torch.allclose(compile_accuracy(affine, z), affine(z))


class Counted(torch.nn.Module):
    calls = 0  # state outside tensors, which a check's runs of the model change too

    def forward(self, x):
        Counted.calls += 1
        return x * Counted.calls


def test_fixture_counter(compile_accuracy):
    out = compile_accuracy(Counted(), torch.linspace(0, 1, 8))
    assert torch.equal(out, torch.linspace(0, 1, 8) * Counted.calls)


def doubled(x):
    return x * 2


def test_plain_meta():
    assert torch.compile(doubled)(torch.ones(4, device="meta")).device.type == "meta"


def test_fixture_meta(compile_accuracy):
    assert compile_accuracy(doubled, torch.ones(4, device="meta")).device.type == "meta"


def test_plain_nested():
    parts = [torch.ones(2, 3), torch.ones(4, 3)]
    out = torch.compile(doubled)(torch.nested.nested_tensor(parts, layout=torch.jagged))
    assert out.is_nested and torch.equal(out.unbind()[1], torch.full((4, 3), 2.0))


def branching(x):
    return torch.cond(x.sum() > 0, lambda y: y.sin(), lambda y: y.cos(), (x,))


def test_fixture_cond(compile_accuracy):
    compile_accuracy(branching, torch.linspace(-1, 2, 16))


def one_batch_size(x):
    return x.view(4, 2, 2).sum(0)


def test_fixture_one_batch_size(compile_accuracy):
    compile_accuracy(one_batch_size, torch.linspace(0, 1, 16).reshape(4, 4), dynamic=True)


def test_fixture_state(compile_accuracy):
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(4, 8), torch.nn.BatchNorm1d(8), torch.nn.Dropout(0.5)
    ).train()
    twin, x = copy.deepcopy(model), torch.randn(16, 4)
    torch.manual_seed(123)
    expected = twin(x)
    expected_draws = torch.rand(3)
    torch.manual_seed(123)
    out = compile_accuracy(model, x)
    assert torch.equal(torch.rand(3), expected_draws) and torch.equal(out, expected)
    assert all(torch.equal(a, b) for a, b in zip(model.buffers(), twin.buffers()))
"""

STATUSES = {
    "test_plain_float8": ("pass", "1 graph(s) pass"),
    "test_fixture_float8": ("pass", ""),
    "test_plain_conj": ("pass", "1 graph(s) pass"),
    "test_fixture_conj": ("pass", ""),
    "test_plain_conj_input": ("pass", "1 graph(s) pass"),
    "test_fixture_conj_input": ("pass", ""),
    "test_fixture_counter": (
        "eager_nondeterministic",
        "eager disagrees with itself across two runs on the same inputs at out",
    ),
    "test_plain_meta": ("not_judged", "1 unchecked"),
    "test_fixture_meta": (
        "not_judged",
        "args[0] holds a meta tensor, which holds no values to compare; the model ran eagerly",
    ),
    "test_plain_nested": ("not_judged", "1 unchecked"),
    "test_fixture_cond": ("pass", ""),
    "test_fixture_one_batch_size": (
        "pass",
        "not judged at input sizes [[9, 4]], a batch size dynamic=True grows to: eager raises "
        "there (RuntimeError: shape '[4, 2, 2]' is invalid for input of size 36); "
        "not judged at input sizes [[19, 4]], a batch size dynamic=True grows to: eager raises "
        "there (RuntimeError: shape '[4, 2, 2]' is invalid for input of size 76)",
    ),
    "test_fixture_state": ("pass", "random ops compiled with Inductor's fallback_random=True"),
}


def test_a_checked_run_decides_every_test_as_a_plain_run(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_exotic=SUITE)
    # torch's own notices (nested tensors' prototype layout, torch.cond's): a plain run's too.
    quiet = ("-W", "ignore::UserWarning", "-p", "no:cacheprovider")
    pytester.runpytest(*quiet).assert_outcomes(passed=len(STATUSES))
    report = pytester.path / "report.json"
    result = pytester.runpytest(
        *quiet,
        "--compile-accuracy",
        "--no-compile-accuracy-minify",
        f"--compile-accuracy-report={report}",
    )
    result.assert_outcomes(passed=len(STATUSES))
    assert "Traceback" not in result.stdout.str()
    checks = {
        test["nodeid"].split("::")[1]: test["checks"][0]
        for test in json.loads(report.read_text())["tests"]
    }
    assert {name: check["status"] for name, check in checks.items()} == {
        name: status for name, (status, _) in STATUSES.items()
    }
    for name, (_, message) in STATUSES.items():
        assert checks[name]["message"].startswith(message), (name, checks[name]["message"])
    unchecked = checks["test_plain_meta"]["unchecked"] + checks["test_plain_nested"]["unchecked"]
    assert [line.split(": ", 1)[1] for line in unchecked] == [
        "not judged: its inputs are meta tensors, which hold no values to judge",
        "not judged: its inputs have jagged sizes (a nested tensor's), which have no int value",
    ]
