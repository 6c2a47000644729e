"""The README's quick start, run as written: its test file in a repository of one's own, its
command; one test passes, the miscompiled one fails with what the README shows, and the HTML
page is written."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

README = Path(__file__).parents[2] / "README.md"


def quick_start() -> tuple[str, str, list[str], str]:
    """The test file's path and source, the command's arguments and the output the README shows."""
    section = README.read_text().split("## Quick start", 1)[1].split("\n## ", 1)[0]
    source = re.search(r"```python\n(.*?)```", section, re.S)
    command = re.search(r"```bash\n(.*?)```", section, re.S)
    shown = re.search(r"```text\n(.*?)```", section, re.S)
    assert source and command and shown, "the quick start has a test file, a command and output"
    path = source.group(1).splitlines()[0].removeprefix("# ")
    words = shlex.split(command.group(1))
    assert words[0] == "pytest"
    return path, source.group(1), words[1:], shown.group(1)


def test_the_quick_start_fails_as_the_readme_shows(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    path, source, arguments, shown = quick_start()
    monkeypatch.setenv("COLUMNS", "80")
    # pytest leaves its short summary uncut where it sees a CI (CI, BUILD_NUMBER): the test
    # reads it as a user's terminal shows it.
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.delenv("BUILD_NUMBER", raising=False)
    (pytester.path / path).parent.mkdir(parents=True)
    (pytester.path / path).write_text(source)
    result = pytester.runpytest(*arguments)
    result.assert_outcomes(passed=1, failed=1)
    output = result.stdout.lines
    # What the plugin prints fits (pytest's own header, its paths and plugins, may not).
    after_header = output[
        next(i for i, line in enumerate(output) if line.startswith("collected")) :
    ]
    assert [line for line in after_header if len(line) > 80] == []
    # Every line the README shows, its figures (times, ratios) aside.
    figures = re.compile(r"\d+(\.\d+)?(e[+-]\d+)?")
    printed = {figures.sub("N", line) for line in output}
    missing = [
        line
        for line in shown.splitlines()
        if line != "[...]" and figures.sub("N", line) not in printed
    ]
    assert not missing, "\n".join(missing)
    assert (pytester.path / "compile-accuracy.html").is_file()
