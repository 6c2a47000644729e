"""A bug report is pasted into a public tracker: the paths it names (the test file, the graph's
place in it) are relative to the rootdir, and no absolute path of this machine is in it, nor in
what ``report`` prints or the header comments of the repros it is made of; nor in the test's
failure, nor in the reports a CI uploads (the JSON report's path fields aside, for tools)."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from pytest_torchcompile.cli import main
from pytest_torchcompile.common.files import BUG_REPORT_NAME

pytest_plugins = ["pytester"]

SUITE = """
import torch
import torch._inductor.config as config


def relu_of_cos(x):
    return x.cos().relu()


def test_plain_compile():
    with config.patch({"cpp.inject_relu_bug_TESTING_ONLY": "accuracy"}):
        torch.compile(relu_of_cos)(torch.randn(64))
"""


PATH_FIELDS = {"repro_path", "path", "kernel_path", "bug_report_path", "minified"}


def _texts(value: Any, field: str = "") -> list[str]:
    """The strings of a JSON report but its path fields."""
    if isinstance(value, dict):
        return [text for key, item in value.items() for text in _texts(item, key)]
    if isinstance(value, list):
        return [text for item in value for text in _texts(item, field)]
    return [value] if isinstance(value, str) and field not in PATH_FIELDS else []


def test_a_bug_report_names_no_absolute_path_of_the_machine(
    pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Not a package named "tests": in this process that name is the project's own test package.
    pytester.mkpydir("model_tests")
    pytester.path.joinpath("model_tests", "test_models.py").write_text(SUITE)
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(pytester.path / "summary.md"))
    result = pytester.runpytest(
        "--compile-accuracy",
        "-p",
        "no:cacheprovider",
        "--compile-accuracy-report=report.json",
        "--compile-accuracy-html=report.html",
        "--junitxml=junit.xml",
    )
    result.assert_outcomes(failed=1)
    (case,) = [path for path in (pytester.path / ".compile-accuracy").iterdir() if path.is_dir()]
    written = (case / BUG_REPORT_NAME).read_text()
    capsys.readouterr()
    assert main(["report", str(case)]) == 0
    printed = capsys.readouterr().out
    headers = [
        line
        for name in ("repro.py", "minified.py")
        for line in (case / name).read_text().splitlines()
        if line.startswith("# ")
    ]

    assert (
        "model_tests/test_models.py:" in written
    )  # where the graph was compiled, as pytest names it
    machine = [str(pytester.path), str(Path(str(pytester.path)).resolve()), str(Path.home())]
    for text in (written, printed, *headers):
        assert not [path for path in machine if path in text], text
    uploaded = [pytester.path.joinpath(name).read_text() for name in ("summary.md", "report.html")]
    junit = ET.parse(pytester.path / "junit.xml").getroot()
    uploaded += [element.text or "" for element in junit.iter("failure")]
    uploaded += [element.get("message", "") for element in junit.iter("failure")]
    uploaded += _texts(json.loads(pytester.path.joinpath("report.json").read_text()))
    # pytest's own lines name the rootdir and the JUnit file as given.
    uploaded += [
        line
        for line in result.stdout.lines
        if not line.startswith("rootdir:") and "generated xml file" not in line
    ]
    for text in uploaded:
        assert not [path for path in machine if path in text], text
