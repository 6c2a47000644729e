"""The marker's ``kind`` names the failure kind a generated repro test's file records, by which
the session reads that test's result; the marker of any other test cannot give it, and its own
assertion stays its own."""

from __future__ import annotations

import pytest

from pytest_torchcompile.common.settings import CheckSettings, marker_settings
from pytest_torchcompile.run.repro_tests import recorded_kind, repro_test_result

REPRO_TEST = """
import pytest

KIND = "accuracy"

@pytest.mark.inductor_repro(kind=KIND, tol=1e-4)
def test_repro():
    pass
"""


def _item(pytester: pytest.Pytester, source: str) -> pytest.Item:
    """The test of a module, collected without a run (the plugin off: its hooks end runs)."""
    module = pytester.getmodulecol(source, configargs=("-p", "no:torchcompile"))
    (item,) = module.collect()
    assert isinstance(item, pytest.Item)
    return item


def _failed(item: pytest.Item, text: str) -> pytest.TestReport:
    return pytest.TestReport(item.nodeid, item.location, {}, "failed", text, "call")


def test_a_repro_files_own_test_records_its_kind(pytester: pytest.Pytester) -> None:
    item = _item(pytester, REPRO_TEST)
    assert recorded_kind(item) == "accuracy"
    made = repro_test_result(item, _failed(item, "E   AssertionError: REPRODUCED"))
    assert made is not None and str(made.status) == "fail_accuracy"
    marker = item.get_closest_marker("inductor_repro")
    assert marker_settings(CheckSettings(), marker, repro_test=True).tol == 1e-4


@pytest.mark.parametrize(
    "source",
    [
        REPRO_TEST.replace('KIND = "accuracy"\n', "").replace("kind=KIND", 'kind="accuracy"'),
        REPRO_TEST.replace('KIND = "accuracy"', 'KIND = "compile_error"').replace(
            "kind=KIND", 'kind="accuracy"'
        ),
        REPRO_TEST.replace("def test_repro", "def test_mine"),
        REPRO_TEST.replace('"accuracy"', '"banana"'),
    ],
    ids=["no-KIND", "another-KIND", "another-test", "no-failure-kind"],
)
def test_a_users_test_cannot_give_kind(source: str, pytester: pytest.Pytester) -> None:
    item = _item(pytester, source)
    assert recorded_kind(item) is None
    # Its own assertion, whatever it says, is no compile-accuracy result.
    assert repro_test_result(item, _failed(item, "E   AssertionError: REPRODUCED")) is None
    assert repro_test_result(item, _failed(item, "FAILS DIFFERENTLY\naccuracy: mine")) is None
    assert (
        repro_test_result(
            item, pytest.TestReport(item.nodeid, item.location, {}, "passed", None, "call")
        )
        is None
    )
    marker = item.get_closest_marker("inductor_repro")
    with pytest.raises(pytest.UsageError) as refused:
        marker_settings(CheckSettings(), marker)
    assert str(refused.value).startswith(
        "@pytest.mark.inductor_repro: unknown compile-accuracy option(s) ['kind']; known: ["
    )
