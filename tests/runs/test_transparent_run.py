"""A checked run decides, computes and leaves torch as a plain run does: the same outcome per
test, the same values (random ones included: the test's compile is its own, config and all), the
same counters after a compile (the plugin's own compiles leave none), the same flags and
generator states after each test."""

from __future__ import annotations

import json

import pytest
import torch

SUITE = """
import json
import os

import pytest
import torch
import torch._inductor.metrics
import torch._inductor.utils
from torch._dynamo.utils import counters


def dump(name, value):
    torch.save(value, f"{os.environ['RUN']}-{name}.pt")


@pytest.fixture(scope="module", autouse=True)
def precision_put_back():
    yield
    torch.set_float32_matmul_precision("highest")


def mm_relu(x, w):
    y = torch.nn.functional.linear(x, w).relu()
    return (y @ w).sum(-1) + torch.cat([y, y], 1).mean()


def test_counters_after_a_compile():
    counters.clear()
    torch._inductor.metrics.reset()
    # As PyTorch's own tests compile: a cache hit of an earlier run skips the passes that count.
    with torch._inductor.utils.fresh_cache():
        torch.compile(mm_relu)(torch.randn(16, 32), torch.randn(32, 32))
    with open(f"{os.environ['RUN']}-counters.json", "w") as file:
        json.dump({"counters": {kind: dict(counts) for kind, counts in counters.items() if kind != "aot_autograd"},
                   "kernels": torch._inductor.metrics.generated_kernel_count}, file, sort_keys=True)


def noisy(x):
    return torch.nn.functional.dropout(x, 0.5, training=True) + torch.rand_like(x)


def test_compiled_random_numbers_are_eagers():
    x = torch.randn(64)
    torch.manual_seed(0)
    compiled = torch.compile(noisy)(x)
    torch.manual_seed(0)
    assert torch.equal(compiled, noisy(x))


def test_random_values_and_generators():
    torch.manual_seed(1)
    compiled = torch.compile(noisy)(torch.randn(64))
    dump("random", (compiled, torch.get_rng_state()))


def test_sets_flags_and_draws():
    torch.set_float32_matmul_precision("high")
    torch.manual_seed(2)
    torch.compile(mm_relu)(torch.randn(16, 32), torch.randn(32, 32))


def test_flags_and_generators_after_a_test():
    dump("state", (torch.get_float32_matmul_precision(), torch.get_rng_state()))
"""


def _differing(plain: dict, checked: dict, path: str = "") -> list[str]:
    """Where two JSON trees differ: each differing leaf as "path: plain -> checked"."""
    if not (isinstance(plain, dict) and isinstance(checked, dict)):
        return [] if plain == checked else [f"{path}: {plain!r} -> {checked!r}"]
    return [
        line
        for key in sorted(set(plain) | set(checked))
        for line in _differing(plain.get(key), checked.get(key), f"{path}/{key}")
    ]


def outcomes(result: pytest.RunResult) -> dict[str, str]:
    return {
        line.split(" ")[1].split("::")[1]: line.split(" ")[0]
        for line in result.outlines
        if line.startswith(("PASSED ", "FAILED "))
    }


def test_a_checked_run_is_a_plain_one(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.makepyfile(test_suite=SUITE)
    monkeypatch.setenv("RUN", "plain")
    # Each run in a process of its own, as a suite runs: what earlier tests left of Dynamo's state
    # in this one made the frame counters differ.
    plain = pytester.runpytest_subprocess("-rA", "-p", "no:cacheprovider")
    monkeypatch.setenv("RUN", "checked")
    checked = pytester.runpytest_subprocess("-rA", "-p", "no:cacheprovider", "--compile-accuracy")
    assert outcomes(plain) == {
        "test_counters_after_a_compile": "PASSED",
        "test_compiled_random_numbers_are_eagers": "FAILED",
        "test_random_values_and_generators": "PASSED",
        "test_sets_flags_and_draws": "PASSED",
        "test_flags_and_generators_after_a_test": "PASSED",
    }
    checked.stdout.fnmatch_lines(["*plain torch.compile graphs: 4 judged*"])
    counters = [
        json.loads((pytester.path / f"{run}-counters.json").read_text())
        for run in ("plain", "checked")
    ]
    assert counters[0]["counters"]["inductor"]["pattern_matcher_count"] > 0
    random, state = (
        [torch.load(pytester.path / f"{run}-{name}.pt") for run in ("plain", "checked")]
        for name in ("random", "state")
    )
    # Every class of difference at once: each is a defect of its own.
    differences = {
        "outcomes": outcomes(plain) != outcomes(checked),
        "counters": _differing(counters[0], counters[1]),
        "random values": not torch.equal(random[0][0], random[1][0]),
        "generator after random values": not torch.equal(random[0][1], random[1][1]),
        "flags after a test": state[0][0] != state[1][0],
        "generator after a test": not torch.equal(state[0][1], state[1][1]),
    }
    assert {name: differs for name, differs in differences.items() if differs} == {}
