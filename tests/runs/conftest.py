"""Every test here runs pytest end to end through pytester, a whole run or several: they belong
to the slow step (``pytest -m slow``), so that the README's test command runs the in-process unit
tests alone. The real-bug corpus keeps its own step (``-m realbugs``); a test marked
``stops_a_run`` stays in the default run (pyproject.toml's markers say why)."""

from __future__ import annotations

from pathlib import Path

import pytest

HERE = Path(__file__).parent


@pytest.hookimpl(tryfirst=True)  # before ``-m`` deselects by marker
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.path.is_relative_to(HERE) and not any(
            item.get_closest_marker(name) for name in ("realbugs", "stops_a_run")
        ):
            item.add_marker(pytest.mark.slow)
