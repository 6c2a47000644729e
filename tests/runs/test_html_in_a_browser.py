"""The HTML report of a real failing run, opened in a real browser: headless Chromium (Debian's
``chromium``, which CI's ``.ci/run`` installs) renders the page offline, its DOM shows where the
deviation starts and the minifier's trajectory, and a screenshot is taken at a laptop's width.
Skipped where no Chromium is installed."""

from __future__ import annotations

import shutil
import struct
import subprocess
from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

SUITE = """
import torch
import pytest


@pytest.fixture(autouse=True)
def _inject_bug():
    import torch._inductor.config as config
    with config.patch({"cpp.inject_relu_bug_TESTING_ONLY": "accuracy"}):
        yield


def test_mlp(compile_accuracy):
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 16), torch.nn.ReLU(),
        torch.nn.Linear(16, 4), torch.nn.Tanh(),
    )
    compile_accuracy(model, torch.randn(4, 8))
"""

BROWSERS = ("chromium", "chromium-browser", "google-chrome")


def browser() -> str:
    found = next((path for name in BROWSERS if (path := shutil.which(name))), None)
    if found is None:
        pytest.skip("no Chromium installed (apt-get install -y chromium; .ci/run installs it)")
    return found


def headless(command: str, page: Path, *options: str, home: Path) -> str:
    """Chromium run headless on ``page``; without a network (an offline page needs none) and, as
    root in a container, without its sandbox."""
    done = subprocess.run(
        [
            command,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--no-first-run",
            "--proxy-server=127.0.0.1:9",  # nothing can be fetched
            f"--user-data-dir={home / 'profile'}",
            *options,
            page.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=180,
        env={"HOME": str(home), "PATH": "/usr/bin:/bin"},
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def test_the_page_of_a_failing_run_renders_in_a_browser(pytester: pytest.Pytester) -> None:
    command = browser()
    pytester.makepyfile(test_model=SUITE)
    result = pytester.runpytest("--compile-accuracy", "--compile-accuracy-html=out/report.html")
    result.assert_outcomes(failed=1)
    page = pytester.path / "out" / "report.html"
    result.stdout.fnmatch_lines(["HTML report written to *report.html"])

    dom = headless(command, page, "--dump-dom", home=pytester.path)
    assert '<p id="summary">1 check in 1 test: 1 fail_accuracy</p>' in dom
    assert 'class="starts"' in dom and "starts: relu" in dom and "(aten.relu)" in dom
    assert dom.count('class="step"') >= 2  # the trajectory: the locate run, then candidates
    assert 'href="../.compile-accuracy/' in dom and "minified.py" in dom and "bug_report.md" in dom
    assert "deviation appears in Inductor's C++ codegen of aten.relu" in dom

    shot = pytester.path / "shot.png"
    headless(command, page, f"--screenshot={shot}", "--window-size=1280,1600", home=pytester.path)
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", data[16:24])
    assert (width, height) == (1280, 1600)
    # A blank page compresses to a few kilobytes; text, tables and two plots do not.
    assert len(data) > 30_000, len(data)
