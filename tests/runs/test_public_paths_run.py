"""A bug report is pasted into a public tracker: the paths it names (the test file, the graph's
place in it) are relative to the rootdir, and no absolute path of this machine is in it, nor in
what ``report`` prints or the header comments of the repros it is made of."""

from __future__ import annotations

from pathlib import Path

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


def test_a_bug_report_names_no_absolute_path_of_the_machine(
    pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    # Not a package named "tests": in this process that name is the project's own test package.
    pytester.mkpydir("model_tests")
    pytester.path.joinpath("model_tests", "test_models.py").write_text(SUITE)
    result = pytester.runpytest("--compile-accuracy", "-p", "no:cacheprovider")
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
