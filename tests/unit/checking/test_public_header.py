"""The text a repro's header takes from a check (its title, status, notes) goes into a bug report
pasted where anyone reads it: paths under the rootdir relative to it, the home directory as ``~``."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_torchcompile.checking.runner import _public
from pytest_torchcompile.reporting.layout import TerminalLayout


def test_no_absolute_path_of_the_machine_is_made_public(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "alice"))
    root = tmp_path / "alice" / "project"
    label = f"t.py::t :: graph 0 from {root}/tests/t.py:3 (t); helper {tmp_path}/alice/lib/m.py:9"

    shown = _public(label, TerminalLayout(root=root))

    assert shown == "t.py::t :: graph 0 from tests/t.py:3 (t); helper ~/lib/m.py:9"
