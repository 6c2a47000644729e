"""An Inductor config value not of the type this torch declares for it is named with what it
takes; a value of a form the type does not say (a list, a callable, a default of None with no
annotation) is left to the compile."""

from __future__ import annotations

from typing import Any

import pytest

from pytest_torchcompile.torch_internals.config import inductor_config_refusal

DECLARED = ", as this torch's Inductor config declares it"


@pytest.mark.parametrize(
    ("name", "value", "takes"),
    [
        ("freezing", "yes", "a bool"),
        ("freezing", 1, "a bool"),
        ("cpp.threads", 2.0, "an int"),
        ("cpp.threads", True, "an int"),
        ("cpu_gpu_bw", True, "a float"),
        ("cpp.simdlen", "8", "an int or None"),
        ("cpp.inject_relu_bug_TESTING_ONLY", 1, "a str or None"),
        ("cpu_backend", "cp", "one of 'cpp', 'triton', 'halide', 'pallas'"),
        ("triton.multi_kernel", True, "one of 0, 1, 2, 3"),
    ],
)
def test_a_value_not_of_the_declared_type_is_named_with_what_it_takes(
    name: str, value: Any, takes: str
) -> None:
    assert inductor_config_refusal(name, value) == takes + DECLARED


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("freezing", True),
        ("cpp.threads", 2),
        ("cpu_gpu_bw", 50),
        ("cpp.simdlen", None),
        ("cpu_backend", "cpp"),
        ("triton.multi_kernel", 1),
        # A str, as declared: which strings Inductor takes, its config does not say.
        ("cpp.inject_relu_bug_TESTING_ONLY", "acuracy"),
        ("worker_log_path", 3),
        ("cuda.cutlass_dynamic_cluster_shape", [1]),
        ("post_grad_custom_pre_pass", "anything"),
        ("no.such.name", 1),
    ],
)
def test_a_value_of_the_declared_type_or_of_a_type_unsaid_is_taken(name: str, value: Any) -> None:
    assert inductor_config_refusal(name, value) is None
