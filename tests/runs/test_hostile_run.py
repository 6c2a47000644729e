"""Hostile conditions around whole runs (pytester): a repro directory with a planted symbolic
link, on a full disk, that is a file or read-only; reruns; an interrupted minify phase."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def wide_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    """These tests read paths on one line: a run's output wraps them at the terminal's width."""
    monkeypatch.setenv("COLUMNS", "400")


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
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
    compile_accuracy(model, torch.randn(4, 8))
"""
SLUG = "test_model.py__test_mlp"


def test_a_planted_link_at_a_case_directory_is_replaced_and_the_outside_untouched(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(test_model=SUITE)
    outside = pytester.path / "elsewhere"
    outside.mkdir()
    (outside / "repro.py").write_text("# the user's own file\n")
    root = pytester.path / ".compile-accuracy"
    root.mkdir()
    (root / SLUG).symlink_to(outside)
    result = pytester.runpytest("--compile-accuracy", "--no-compile-accuracy-minify")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        ["*compile accuracy: fail_accuracy*", f"repro: .compile-accuracy/{SLUG}/repro.py"]
    )
    assert str(outside) not in result.stdout.str()
    assert sorted(p.name for p in outside.iterdir()) == ["repro.py"]
    assert (outside / "repro.py").read_text() == "# the user's own file\n"
    assert not (root / SLUG).is_symlink() and (root / SLUG / "repro.py").is_file()


NO_SPACE = """
import errno, os, tempfile
from pathlib import Path



make_temporary = tempfile.mkstemp
FULL = Path(__file__).parent / ".compile-accuracy"


def no_space_in_the_repro_directory(*args, **kwargs):
    # The minify queue's small files still fit; a repro does not.
    where = Path(kwargs.get("dir") or ".")
    if where.is_relative_to(FULL) and not where.is_relative_to(FULL / ".queue"):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(kwargs["dir"]))
    return make_temporary(*args, **kwargs)


# Every file is written through a temporary file beside it (files.atomic_write).
tempfile.mkstemp = no_space_in_the_repro_directory
"""


def test_a_full_disk_keeps_the_verdict_in_every_report(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(NO_SPACE)
    pytester.makepyfile(test_model=SUITE)
    report = pytester.path / "report.json"
    # A process of its own: the conftest replaces tempfile.mkstemp in the process it runs in.
    result = pytester.runpytest_subprocess(
        "--compile-accuracy", "--no-compile-accuracy-minify", f"--compile-accuracy-report={report}"
    )
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*compile accuracy: fail_accuracy: *",
            "*output*rmse(comp,fp64)*",
            "repro not written: [[]Errno 28[]] No space left on device*",
        ]
    )
    result.stdout.no_fnmatch_line("*OSError*")
    (test,) = json.loads(report.read_text())["tests"]
    assert test["status"] == "fail_accuracy"
    assert "No space left on device" in test["checks"][0]["repro_unwritten"]
    assert test["checks"][0]["repro_path"] is None


@pytest.mark.slow
def test_a_rerun_replaces_its_case_directory(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_model=SUITE)
    root = pytester.path / ".compile-accuracy"
    first = pytester.runpytest("--compile-accuracy", "--no-compile-accuracy-minify")
    (root / SLUG / "left-by-run-1").write_text("")
    second = pytester.runpytest("--compile-accuracy", "--no-compile-accuracy-minify")
    path = f"repro: .compile-accuracy/{SLUG}/repro.py"
    first.stdout.fnmatch_lines([path])
    second.stdout.fnmatch_lines([path])
    assert sorted(p.name for p in root.iterdir() if p.name.startswith("test_")) == [
        SLUG,
        f"{SLUG}.claimed",
        f"{SLUG}.lock",
    ]
    assert not (root / SLUG / "left-by-run-1").exists()


@pytest.mark.parametrize("where", ["file", "under a file"])
def test_a_repro_directory_that_is_a_file_is_a_one_line_usage_error(
    pytester: pytest.Pytester, where: str
) -> None:
    pytester.makepyfile(test_model=SUITE)
    (pytester.path / "repros").write_text("")
    directory = pytester.path / "repros" if where == "file" else pytester.path / "repros" / "deeper"
    result = pytester.runpytest("--compile-accuracy", f"--compile-accuracy-dir={directory}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    why = "it is a file, not a directory" if where == "file" else "Not a directory"
    assert result.stderr.lines == [
        f"ERROR: compile accuracy: cannot write in the repro directory {directory}: {why}; "
        "give a writable one with --compile-accuracy-dir",
        "",
    ] or result.stderr.lines[:1] == [
        f"ERROR: compile accuracy: cannot write in the repro directory {directory}: {why}; "
        "give a writable one with --compile-accuracy-dir"
    ]
    assert "Traceback" not in result.stdout.str() + result.stderr.str()
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()


def _read_only_command(directory: Path, command: list[str]) -> list[str]:
    """``command`` run with ``directory`` read-only: by its mode, or for root (whom modes do not
    stop) as a read-only tmpfs in a mount namespace of its own."""
    if os.geteuid() != 0:
        directory.chmod(0o555)
        return command
    if (
        shutil.which("unshare") is None
        or subprocess.run(["unshare", "-m", "true"], capture_output=True).returncode != 0
    ):
        pytest.skip("running as root without mount namespaces: no read-only directory to be had")
    script = f'mount -t tmpfs -o ro,size=1m tmpfs "{directory}" && exec "$@"'
    return ["unshare", "-m", "sh", "-c", script, "sh", *command]


def test_a_read_only_repro_directory_is_a_one_line_usage_error(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_model=SUITE)
    directory = pytester.path / "repros"
    directory.mkdir()
    command = _read_only_command(
        directory,
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            "--compile-accuracy",
            f"--compile-accuracy-dir={directory}",
        ],
    )
    run = subprocess.run(command, capture_output=True, text=True, cwd=pytester.path, timeout=300)
    assert run.returncode == pytest.ExitCode.USAGE_ERROR, run.stdout + run.stderr
    assert (
        run.stderr.strip().splitlines()
        == [
            f"ERROR: compile accuracy: cannot write in the repro directory {directory}: Read-only file system; "
            "give a writable one with --compile-accuracy-dir"
        ]
        or "Permission denied" in run.stderr
    )
    assert "Traceback" not in run.stdout + run.stderr


SLOW_MINIFIER = """
import os, time
from pathlib import Path
from pytest_torchcompile.judging.isolation.parent import IsolatedJudge
from pytest_torchcompile.minifying.phase import MINIFIER_KEY


def pytest_configure(config):
    config.stash[MINIFIER_KEY] = minify


def minify(repro_path, *, timeout_s=300.0, progress=None, isolate=True, device=None):
    with IsolatedJudge() as judge:
        Path(os.environ["CHILD_PID_FILE"]).write_text(f"{judge._child.process.pid} {judge._workdir}")
        time.sleep(600)
"""

TWO_FAILING = """
import pytest, torch


@pytest.mark.inductor_repro(inductor_config={"cpp.inject_relu_bug_TESTING_ONLY": "accuracy"})
@pytest.mark.parametrize("seed", [0, 1])
def test_mlp(compile_accuracy, seed):
    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
    compile_accuracy(model, torch.randn(4, 8))
"""


def as_from_a_terminal() -> None:
    """A run started as from a shell: SIGINT neither ignored nor blocked, whatever this test
    process inherited or was left with by the runs before it (a full suite's worker)."""
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def interrupt(run: subprocess.Popen[str], how: str = "Ctrl-C") -> None:
    """Ctrl-C as a terminal gives it: SIGINT to the run's whole process group, its judging
    children and Inductor's compile workers with it; or SIGTERM, as a CI job's timeout or
    ``kill`` gives it, to pytest's process alone (what it started must be ended by it)."""
    if how == "Ctrl-C":
        os.killpg(run.pid, signal.SIGINT)
    else:
        os.kill(run.pid, signal.SIGTERM)


STOPS = ["Ctrl-C", "SIGTERM"]


@pytest.mark.stops_a_run
@pytest.mark.parametrize("how", STOPS)
def test_ctrl_c_in_the_minify_phase_ends_cleanly_with_the_summary(
    pytester: pytest.Pytester, how: str
) -> None:
    from pytest_torchcompile.common.processes import pid_alive

    pytester.makepyfile(test_model=TWO_FAILING)
    pytester.makeconftest(SLOW_MINIFIER)
    child_pid_file = pytester.path / "child.pid"
    report = pytester.path / "report.json"
    env = {**os.environ, "CHILD_PID_FILE": str(child_pid_file)}
    run = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            "--compile-accuracy",
            f"--compile-accuracy-report={report}",
        ],
        cwd=pytester.path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
        preexec_fn=as_from_a_terminal,
    )
    try:
        for _ in range(600):
            if child_pid_file.exists() and child_pid_file.read_text():
                break
            assert run.poll() is None, run.communicate()[0]
            time.sleep(0.5)
        pid, workdir = child_pid_file.read_text().split(" ", 1)
        child = int(pid)
        assert pid_alive(child) and Path(workdir).is_dir()
        interrupt(run, how)
        output, _ = run.communicate(timeout=120)
    finally:
        run.kill()
    assert run.returncode == pytest.ExitCode.INTERRUPTED, output
    assert "Traceback" not in output and "KeyboardInterrupt" not in output, output
    assert "compile accuracy: 2 checks in 2 tests: 2 fail_accuracy" in output
    for seed in (0, 1):
        assert (
            f"not minified test_model.py::test_mlp[{seed}]: the run stopped first: minify: interrupted; "
            "unminified repro kept: "
        ) in output, output
    assert not pid_alive(child) and not Path(workdir).exists()
    assert not (pytester.path / ".compile-accuracy" / ".queue").exists()
    data = json.loads(report.read_text())
    assert [check["minify"]["stop"] for test in data["tests"] for check in test["checks"]] == [
        "interrupted"
    ] * 2
    repros = sorted((pytester.path / ".compile-accuracy").glob("*/repro.py"))
    assert len(repros) == 2
    code = "import sys; from pytest_torchcompile.repros.loading import load_repro; [load_repro(p) for p in sys.argv[1:]]"
    loaded = subprocess.run(
        [sys.executable, "-c", code, *map(str, repros)], capture_output=True, text=True, timeout=300
    )
    assert loaded.returncode == 0, loaded.stderr


SLOW_MINIFIERS = """
import os, time
from pathlib import Path
from pytest_torchcompile.judging.isolation.parent import IsolatedJudge
from pytest_torchcompile.minifying.phase import MINIFIER_KEY


def pytest_configure(config):
    config.stash[MINIFIER_KEY] = minify


def minify(repro_path, *, timeout_s=300.0, progress=None, isolate=True, device=None):
    with IsolatedJudge() as judge:
        with open(os.environ["CHILD_PID_FILE"], "a") as children:
            children.write(f"{judge._child.process.pid} {judge._workdir}\\n")
        time.sleep(600)
"""


@pytest.mark.slow
def test_sigterm_in_the_minify_phase_under_xdist_ends_cleanly_with_the_summary(
    pytester: pytest.Pytester,
) -> None:
    """A CI job's timeout sends SIGTERM to pytest's process alone, the xdist controller, while its
    workers minify: the run ends as after Ctrl-C, with its summary, its report and every repro,
    and the workers' judging children and their directories are gone with it."""
    from pytest_torchcompile.common.processes import pid_alive

    pytester.makepyfile(test_model=TWO_FAILING)
    pytester.makeconftest(SLOW_MINIFIERS)
    child_pid_file = pytester.path / "children.txt"
    report = pytester.path / "report.json"
    env = {**os.environ, "CHILD_PID_FILE": str(child_pid_file)}
    run = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            "-n",
            "2",
            "--compile-accuracy",
            f"--compile-accuracy-report={report}",
        ],
        cwd=pytester.path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
        preexec_fn=as_from_a_terminal,
    )
    try:
        # Each worker claims a job as its test is done: two minify at once, or one, then the other.
        for _ in range(1200):
            if child_pid_file.exists() and child_pid_file.read_text().count("\n") == 2:
                break
            assert run.poll() is None, run.communicate()[0]
            time.sleep(0.5)
        children = [line.split(" ", 1) for line in child_pid_file.read_text().splitlines()]
        assert children and all(
            pid_alive(int(pid)) and Path(workdir).is_dir() for pid, workdir in children
        )
        interrupt(run, "SIGTERM")
        output, _ = run.communicate(timeout=180)
    finally:
        run.kill()
    assert run.returncode == pytest.ExitCode.INTERRUPTED, output
    # The interrupt reaches the controller in xdist's test loop, which waits for the workers to
    # end their sessions: pytest says so in its one line, as for any interrupt there.
    assert "Traceback" not in output and "INTERNALERROR" not in output, output
    assert "compile accuracy: 2 checks in 2 tests: 2 fail_accuracy" in output, output
    for seed in (0, 1):
        assert (
            f"not minified test_model.py::test_mlp[{seed}]: the run stopped first: minify: interrupted; "
            "unminified repro kept: "
        ) in output, output
    for pid, workdir in children:
        assert not pid_alive(int(pid)) and not Path(workdir).exists()
    assert not (pytester.path / ".compile-accuracy" / ".queue").exists()
    data = json.loads(report.read_text())
    assert [check["minify"]["stop"] for test in data["tests"] for check in test["checks"]] == [
        "interrupted"
    ] * 2
    assert len(sorted((pytester.path / ".compile-accuracy").glob("*/repro.py"))) == 2
    assert sorted(path.name for path in pytester.path.iterdir() if path.name != "__pycache__") == [
        ".compile-accuracy",
        "children.txt",
        "conftest.py",
        "report.json",
        "test_model.py",
    ]


SLEEPS_IN_ITS_CHECK = """
import os, time
from pathlib import Path
import torch


def slow(x):
    Path(os.environ["CHECKING_FILE"]).write_text("")
    time.sleep(600)
    return x


def test_slow(compile_accuracy):
    compile_accuracy(slow, torch.ones(3))
"""


@pytest.mark.stops_a_run
@pytest.mark.parametrize("how", STOPS)
def test_ctrl_c_during_a_check_exits_as_pytest_does(pytester: pytest.Pytester, how: str) -> None:
    pytester.makepyfile(test_model=SLEEPS_IN_ITS_CHECK)
    checking = pytester.path / "checking"
    report = pytester.path / "report.json"
    run = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            "--compile-accuracy",
            f"--compile-accuracy-report={report}",
        ],
        cwd=pytester.path,
        env={**os.environ, "CHECKING_FILE": str(checking)},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
        preexec_fn=as_from_a_terminal,
    )
    try:
        for _ in range(600):
            if checking.exists():
                break
            assert run.poll() is None, run.communicate()[0]
            time.sleep(0.5)
        interrupt(run, how)
        output, _ = run.communicate(timeout=120)
    finally:
        run.kill()
    assert run.returncode == pytest.ExitCode.INTERRUPTED, output
    assert "INTERNALERROR" not in output and "Traceback" not in output, output
    assert json.loads(report.read_text())["run"]["exitstatus"] == pytest.ExitCode.INTERRUPTED
    assert not (pytester.path / ".compile-accuracy" / ".queue").exists()


def test_a_linked_queue_directory_is_a_usage_error_and_nothing_outside_is_touched(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(test_model=SUITE)
    outside = pytester.path / "elsewhere"
    old_run = outside / "20200101-000000-1-deadbeef"
    old_run.mkdir(parents=True)
    (old_run / "mine.txt").write_text("the user's")
    os.utime(old_run, (0, 0))
    root = pytester.path / ".compile-accuracy"
    root.mkdir()
    (root / ".queue").symlink_to(outside)
    result = pytester.runpytest("--compile-accuracy")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            f"ERROR: compile accuracy: cannot write in the repro directory {root}: "
            f"{root / '.queue'} is a symbolic link (to {outside}): *"
        ]
    )
    assert (old_run / "mine.txt").read_text() == "the user's"
    assert [p.name for p in outside.iterdir()] == [old_run.name]


@pytest.mark.slow
def test_a_really_full_disk_keeps_the_verdict(pytester: pytest.Pytester) -> None:
    """As the test above, on a tmpfs that has room for the minify queue's small files but not for
    a repro; needs mount namespaces (root, or a machine that lends them)."""
    if (
        shutil.which("unshare") is None
        or subprocess.run(["unshare", "-m", "true"], capture_output=True).returncode
    ):
        pytest.skip("no mount namespaces: no small filesystem to fill")
    pytester.makepyfile(test_model=SUITE)
    root = pytester.path / ".compile-accuracy"
    root.mkdir()
    report = pytester.path / "report.json"
    script = (
        f'mount -t tmpfs -o size=512k tmpfs "{root}" && '
        f'head -c {512 * 1024 - 20 * 1024} /dev/zero > "{root}/filler" && exec "$@"'
    )
    run = subprocess.run(
        [
            "unshare",
            "-m",
            "sh",
            "-c",
            script,
            "sh",
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            "--compile-accuracy",
            "--no-compile-accuracy-minify",
            f"--compile-accuracy-report={report}",
        ],
        capture_output=True,
        text=True,
        cwd=pytester.path,
        timeout=600,
    )
    assert run.returncode == pytest.ExitCode.TESTS_FAILED, run.stdout + run.stderr
    assert "repro not written: [Errno 28] No space left on device" in run.stdout, run.stdout
    assert "Traceback" not in run.stdout + run.stderr
    (test,) = json.loads(report.read_text())["tests"]
    assert (
        test["status"] == "fail_accuracy"
        and "No space left" in test["checks"][0]["repro_unwritten"]
    )
