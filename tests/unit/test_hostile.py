"""Hostile inputs and faults, in process: planted symbolic links, stale and planted files, test ids
that would break out of a generated file, a full disk, concurrent baseline updates, memory
exhaustion. Whole runs under such conditions are in ``test_hostile_run.py``."""

from __future__ import annotations

import json
import multiprocessing
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.fx
from processes import run_together
from torch.fx.experimental.proxy_tensor import make_fx

from pytest_torchcompile.checking.model import check_model
from pytest_torchcompile.common.files import UnsafePath, atomic_write
from pytest_torchcompile.common.results import CaseResult
from pytest_torchcompile.common.settings import CheckSettings, GatingSettings
from pytest_torchcompile.common.verdict import Status
from pytest_torchcompile.judging.case import ReproCase
from pytest_torchcompile.judging.judge import ReproBroken
from pytest_torchcompile.reporting.baseline import Gate
from pytest_torchcompile.reporting.baseline_file import (
    HEADER,
    BaselineError,
    load_baseline,
    write_baseline,
)
from pytest_torchcompile.repros import loading, rendering, repro
from pytest_torchcompile.run.session import AccuracySession

OWNER = "this run"


class _Scaled(torch.nn.Module):
    """A graph with a constant too large to inline: its repro writes ``tensors/<hash>.pt``."""

    def __init__(self, offset: float = 0.0) -> None:
        super().__init__()
        self.register_buffer("scale", torch.arange(64, dtype=torch.float32).reshape(8, 8) + offset)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x @ self.scale)


def _case(title: str = "test_a.py::test_x :: graph 0", offset: float = 0.0) -> ReproCase:
    return ReproCase(
        gm=torch.fx.symbolic_trace(_Scaled(offset)),
        inputs=[torch.ones(4, 8)],
        kind="accuracy",
        title=title,
    )


def _run_repro_output(path: Path) -> torch.Tensor:
    loaded = loading.load_repro(path)
    return loaded.module.Repro()(*loaded.case.inputs)


# --- 1: nothing is written through a symbolic link ---------------------------------------------


def test_atomic_write_refuses_a_linked_directory_and_replaces_a_linked_file(tmp_path: Path) -> None:
    root, outside = tmp_path / "root", tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    (outside / "mine.txt").write_text("the user's")
    (root / "case").symlink_to(outside)
    with pytest.raises(UnsafePath, match="symbolic link"):
        atomic_write(root / "case" / "repro.py", b"x", within=root)
    assert sorted(p.name for p in outside.iterdir()) == ["mine.txt"]

    (root / "real").mkdir()
    (root / "real" / "repro.py").symlink_to(outside / "mine.txt")
    atomic_write(root / "real" / "repro.py", b"written", within=root)
    assert not (root / "real" / "repro.py").is_symlink()
    assert (root / "real" / "repro.py").read_bytes() == b"written"
    assert (outside / "mine.txt").read_text() == "the user's"


def test_a_planted_case_directory_link_is_replaced_never_followed(tmp_path: Path) -> None:
    root, outside = tmp_path / ".compile-accuracy", tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    (outside / "repro.py").write_text("the user's file")
    slug = repro.slugify("test_a.py::test_x")
    (root / slug).symlink_to(outside)
    path = repro.write_case(_case(), root, slug, OWNER)
    assert path == root / slug / "repro.py"
    assert not (root / slug).is_symlink() and (root / slug).is_dir()
    assert (outside / "repro.py").read_text() == "the user's file"
    assert sorted(p.name for p in outside.iterdir()) == ["repro.py"]
    assert torch.equal(_run_repro_output(path), _Scaled()(torch.ones(4, 8)))


def test_a_linked_tensors_directory_in_a_case_directory_is_refused(tmp_path: Path) -> None:
    case_dir, outside = tmp_path / "root" / "case", tmp_path / "outside"
    case_dir.mkdir(parents=True)
    outside.mkdir()
    (case_dir / repro.TENSOR_DIR).symlink_to(outside)
    with pytest.raises(UnsafePath, match="tensors is a symbolic link"):
        repro.write_repro(_case(), case_dir / "minified.py", within=case_dir)
    assert list(outside.iterdir()) == []
    assert not (case_dir / "minified.py").exists()


def test_a_linked_kernel_file_is_replaced_not_written_through(tmp_path: Path) -> None:
    from pytest_torchcompile.minifying.repro_file import _write_kernel

    case_dir, outside = tmp_path / "case", tmp_path / "outside.cpp"
    case_dir.mkdir()
    outside.write_text("the user's")
    (case_dir / "minified_kernel.cpp").symlink_to(outside)
    path = _write_kernel(("// kernel", ".cpp"), case_dir)
    assert path is not None and not path.is_symlink() and path.read_text() == "// kernel"
    assert outside.read_text() == "the user's"


# --- 6: what goes into a generated file is escaped for its place -------------------------------


def test_a_test_id_with_a_newline_stays_in_its_comment(tmp_path: Path) -> None:
    title = "test_a.py::test_x[a\nraise SystemExit('live code')\r\u2028b] :: graph 0"
    case = _case(title)
    case.status_line = "fail_compile: RuntimeError: first line\nimport os; os._exit(9)"
    case.notes = ["a note\nwith a second line"]
    source, _ = rendering.render_repro(case)
    header = source[: source.index("from __future__")].splitlines()
    assert header and all(line.startswith("#") or not line.strip() for line in header), header
    path = repro.write_repro(case, tmp_path / "case" / "repro.py")
    loaded = loading.load_repro(path)
    assert (
        loaded.case.title
        == "test_a.py::test_x[a\\nraise SystemExit('live code')\\r\\u2028b] :: graph 0"
    )
    run = subprocess.run(
        [sys.executable, "-c", "import runpy, sys; runpy.run_path(sys.argv[1])", str(path)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stdout + run.stderr  # loads; nothing from the id ran


# --- 8: a rerun replaces its own case directory; claims are per live run -----------------------


def test_claims_distinct_in_a_run_and_taken_back_by_the_next(tmp_path: Path) -> None:
    root = tmp_path / "repros"
    first = [repro.unique_case_dir(root, "test_x", OWNER) for _ in range(3)]
    assert [p.name for p in first] == ["test_x", "test_x-2", "test_x-3"]
    # A later run in this process (pytester's in-process runs), or after this process died.
    assert repro.unique_case_dir(root, "test_x", "the next run").name == "test_x"
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    (root / "test_y.claimed").write_text(
        json.dumps(
            {"owner": "gone", "pid": int(dead.stdout), "start": None, "host": os.uname().nodename}
        )
    )
    (root / "test_z.claimed").write_text("")  # an older plugin's claim
    assert repro.unique_case_dir(root, "test_y", OWNER).name == "test_y"
    assert repro.unique_case_dir(root, "test_z", OWNER).name == "test_z"


def test_a_claim_of_another_live_process_is_kept(tmp_path: Path) -> None:
    root = tmp_path / "repros"
    root.mkdir()
    with subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"]) as other:
        try:
            (root / "test_x.claimed").write_text(
                json.dumps(
                    {
                        "owner": "a concurrent run",
                        "pid": other.pid,
                        "start": None,
                        "host": os.uname().nodename,
                    }
                )
            )
            assert repro.unique_case_dir(root, "test_x", OWNER).name == "test_x-2"
        finally:
            other.kill()


def test_a_rerun_replaces_its_case_directory_whole(tmp_path: Path) -> None:
    root = tmp_path / "repros"
    first = repro.write_case(_case(offset=1.0), root, "test_x", "run 1")
    (first.parent / "minified.py").write_text("# from run 1")
    second = repro.write_case(_case(offset=2.0), root, "test_x", "run 2")
    assert second == first
    assert sorted(p.name for p in root.iterdir() if not p.name.startswith(".")) == [
        "test_x",
        "test_x.claimed",
        "test_x.lock",
    ]
    assert not (second.parent / "minified.py").exists()
    assert len(list((second.parent / repro.TENSOR_DIR).iterdir())) == 1
    assert torch.equal(_run_repro_output(second), _Scaled(2.0)(torch.ones(4, 8)))
    assert oct((second.parent).stat().st_mode & 0o777) == oct(0o755)
    assert not [p for p in root.iterdir() if p.name.endswith((".new", ".old"))]


# --- 9: content-addressed tensors are verified before reuse -----------------------------------


def test_a_stale_or_planted_tensor_file_is_rewritten(tmp_path: Path) -> None:
    path = repro.write_repro(_case(), tmp_path / "case" / "repro.py")
    (tensor,) = (path.parent / repro.TENSOR_DIR).iterdir()
    good = tensor.read_bytes()
    planted = tmp_path / "planted.pt"
    torch.save(torch.zeros(8, 8), planted)
    tensor.write_bytes(planted.read_bytes())
    repro.write_repro(_case(), path.parent / "minified.py")
    assert tensor.read_bytes() == good
    assert torch.equal(_run_repro_output(path.parent / "minified.py"), _Scaled()(torch.ones(4, 8)))


# --- 2, 10: baseline updates lose nothing and keep a link a link -------------------------------


def _results(*test_ids: str) -> list[CaseResult]:
    return [CaseResult(test_id, Status.FAIL_ACCURACY, "deviates") for test_id in test_ids]


def test_updaters_that_loaded_the_baseline_together_lose_no_row(tmp_path: Path) -> None:
    path = tmp_path / "baseline.tsv"
    path.write_text(f"{HEADER}\ntests/test_c.py::test_c\tpass\tkept note\n")
    shard_a = Gate.load(path, update=True)
    shard_b = Gate.load(path, update=True)
    shard_a.update_file(_results("tests/test_a.py::test_a"))
    line = shard_b.update_file(_results("tests/test_b.py::test_b"))
    assert sorted(load_baseline(path).entries) == [
        "tests/test_a.py::test_a",
        "tests/test_b.py::test_b",
        "tests/test_c.py::test_c",
    ]
    assert load_baseline(path).entries["tests/test_c.py::test_c"].note == "kept note"
    assert "3 rows (1 added, 0 changed" in line


def _update_as_a_shard(path: str, index: int, start: Any) -> None:
    gate = Gate.load(path, update=True)
    start.wait(60)
    gate.update_file(_results(f"tests/test_{index}.py::test_{index}"))


def test_shards_updating_at_once_lose_no_row(tmp_path: Path) -> None:
    path = tmp_path / "baseline.tsv"
    shards = [(str(path), i) for i in range(4)]
    assert run_together(multiprocessing.get_context("spawn"), _update_as_a_shard, shards) == [0] * 4
    assert sorted(load_baseline(path).entries) == [f"tests/test_{i}.py::test_{i}" for i in range(4)]


def test_a_baseline_that_is_a_link_stays_one_and_its_target_is_updated(tmp_path: Path) -> None:
    target = tmp_path / "shared" / "baseline.tsv"
    target.parent.mkdir()
    target.write_text(f"{HEADER}\n")
    link = tmp_path / "baseline.tsv"
    link.symlink_to(target)
    Gate.load(link, update=True).update_file(_results("tests/test_a.py::test_a"))
    assert link.is_symlink() and link.resolve() == target
    assert list(load_baseline(target).entries) == ["tests/test_a.py::test_a"]
    write_baseline(link, {"tests/test_b.py::test_b": Status.PASS}, load_baseline(link))
    assert link.is_symlink() and sorted(load_baseline(target).entries) == [
        "tests/test_a.py::test_a",
        "tests/test_b.py::test_b",
    ]


# --- 11: messages say what happened ------------------------------------------------------------


def test_a_baseline_with_a_byte_order_mark_is_read(tmp_path: Path) -> None:
    path = tmp_path / "baseline.tsv"
    path.write_text(f"\ufeff{HEADER}\ntests/test_a.py::test_a\tpass\n", encoding="utf-8")
    assert list(load_baseline(path).entries) == ["tests/test_a.py::test_a"]
    path.write_text("\ufefftests/test_a.py::test_a\tpass\n", encoding="utf-8")
    assert list(load_baseline(path).entries) == ["tests/test_a.py::test_a"]


CALLS: list[int] = []


def counts_its_calls(x: torch.Tensor) -> torch.Tensor:
    CALLS.append(1)
    return x + len(CALLS)


def test_a_model_changing_a_global_is_not_blamed_on_random_ops() -> None:
    outcome = check_model(counts_its_calls, [torch.ones(3)])
    assert outcome.status is Status.EAGER_NONDETERMINISTIC
    assert "draws no random numbers" in outcome.message and "a global" in outcome.message
    assert "dropout" not in outcome.message


def test_an_input_holding_a_nan_is_not_called_mutated() -> None:
    x = torch.tensor([1.0, float("nan"), 3.0])
    outcome = check_model(lambda v: v * 2, [x])
    assert not [leaf.path for leaf in outcome.comparison.leaves if "mutated" in leaf.path]  # type: ignore[union-attr]
    mutated = torch.tensor([1.0, float("nan"), 3.0])
    outcome = check_model(lambda v: v.mul_(2), [mutated])
    assert [leaf.path for leaf in outcome.comparison.leaves if "mutated" in leaf.path] == [  # type: ignore[union-attr]
        "args[0] (mutated in place)"
    ]


def test_a_report_that_cannot_be_written_fails_the_run_but_not_against_a_baseline(
    tmp_path: Path,
) -> None:
    session = AccuracySession(True, tmp_path / "repros", CheckSettings(), lambda: {})
    report = tmp_path / "report.json"
    session.configure_gating(GatingSettings(None, False, False, report))
    report.mkdir()  # after the run started: a path that is a directory then is refused up front
    session.record(_results("tests/test_a.py::test_a")[0])
    end = session.end_run(set())
    assert end.failures == [f"cannot write the JSON report {report}: it is a directory"]
    assert end.heading == "the run fails"


# --- 7: memory exhaustion is not a compiler bug ------------------------------------------------

TOO_MUCH = 2**50
"""Elements no allocator grants: a real ``DefaultCPUAllocator: can't allocate memory``."""


def allocates_too_much_in_fp64(x: torch.Tensor) -> torch.Tensor:
    if x.dtype == torch.float64:
        torch.empty(TOO_MUCH, dtype=torch.float64)
    return torch.relu(x) * 2


def allocates_too_much(x: torch.Tensor) -> torch.Tensor:
    torch.empty(TOO_MUCH, dtype=torch.float64)
    return x


def test_an_fp64_reference_out_of_memory_falls_back_to_the_same_precision_check() -> None:
    outcome = check_model(_Fp64Hungry(), [torch.ones(4096, 256)])
    weights_and_inputs = (256 * 256 + 256 + 4096 * 256) * 8
    assert outcome.status is Status.NO_FP64_REFERENCE and outcome.comparison is not None
    assert outcome.reference.startswith(
        "same-precision cosine check: the fp64 reference does not fit in memory: "
        f"the model's weights and inputs alone take {weights_and_inputs / 2**30:.2f} "
        "GiB in fp64 (RuntimeError: "
    )
    assert "can't allocate memory" in outcome.reference
    assert [leaf.passed for leaf in outcome.comparison.leaves] == [True]


class _Fp64Hungry(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(256, 256)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return allocates_too_much_in_fp64(self.linear(x))


def test_an_eager_run_out_of_memory_gets_its_own_status() -> None:
    outcome = check_model(allocates_too_much, [torch.ones(3)])
    assert outcome.status is Status.OUT_OF_MEMORY
    assert outcome.message.startswith("the eager run ran out of memory: RuntimeError")


def test_a_compile_out_of_memory_is_not_fail_compile(monkeypatch: pytest.MonkeyPatch) -> None:
    from pytest_torchcompile.checking import compiled

    def compile_without_memory(*args: object) -> object:
        return torch.empty(TOO_MUCH, dtype=torch.float64)

    monkeypatch.setattr(compiled, "_compile", compile_without_memory)
    outcome = check_model(torch.relu, [torch.ones(3)])
    assert outcome.status is Status.OUT_OF_MEMORY
    assert "ran out of memory" in outcome.message and "can't allocate memory" in outcome.message


def test_a_plain_graph_out_of_memory_is_not_fail_compile() -> None:
    from types import SimpleNamespace

    from pytest_torchcompile.checking.plain import GraphChecker

    try:
        torch.empty(TOO_MUCH, dtype=torch.float64)
    except RuntimeError as error:
        exhausted = error
    checker = GraphChecker(1e-4, True, False)
    checker.capture.graphs.append(
        SimpleNamespace(  # type: ignore[arg-type]
            label="graph 0", compile_error=exhausted, runtime_error=None, runtime_inputs=None
        )
    )
    (failure,) = checker.error_failures(handled=False)
    assert (
        failure.status is Status.OUT_OF_MEMORY
        and failure.message == "graph 0 ran out of memory compiling"
    )


# --- 12: a judging process that died is replaced, and that is said ----------------------------

KILLED_ONCE = """
import os, signal
from pytest_torchcompile.judging.isolation import tasks as isolation

judge_graph = isolation.judge_graph


def killed_once(*args, **kwargs):
    marker = os.environ["KILLED_ONCE_MARKER"]
    if not os.path.exists(marker):
        open(marker, "w").close()
        os.kill(os.getpid(), signal.SIGKILL)  # as `kill -9` from outside would
    return judge_graph(*args, **kwargs)


isolation.judge_graph = killed_once
"""


def test_a_judging_process_killed_during_minification_is_named_in_the_result(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pytest_torchcompile.common.allowed import SETUP_ENV
    from pytest_torchcompile.minifying.repro_file import minify_repro

    setup = tmp_path / "killed_once.py"
    setup.write_text(KILLED_ONCE)
    monkeypatch.setenv(SETUP_ENV, str(setup))
    monkeypatch.setenv("KILLED_ONCE_MARKER", str(tmp_path / "killed"))
    x = torch.randn(8)
    case = ReproCase(
        make_fx(lambda v: (torch.cos(torch.relu(torch.sin(v))),))(x),
        [x],
        "accuracy",
        "killed",
        config_source="torch._inductor.config.cpp.inject_relu_bug_TESTING_ONLY = 'accuracy'",
    )
    path = repro.write_repro(case, tmp_path / "case" / "repro.py")
    result = minify_repro(path, timeout_s=240, find_stage=False)
    assert (tmp_path / "killed").exists()
    assert result.path is not None, result.summary_line("test_x")
    assert result.judge_deaths == ["died of signal SIGKILL"]
    assert result.summary_line("test_x").splitlines()[-1] == (
        "  the judging process died of signal SIGKILL and was replaced"
    )


# --- held already: kept held ------------------------------------------------------------------


@pytest.mark.parametrize(
    "content",
    [
        b"\x80\x81\xfe\xff garbage",  # corrupt: not UTF-8
        b"tests/test_a.py::test_a\tpass\ntests/test_b.py::test_b\tfail_acc",  # truncated mid-row
        b'{"tests/test_a.py::test_a": "pass"}\n',  # foreign: another tool's JSON
        b"test id,status\ntests/test_a.py::test_a,pass\n",  # foreign: CSV
    ],
    ids=["corrupt", "truncated", "json", "csv"],
)
def test_an_unusable_baseline_is_rejected_with_one_line(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "baseline.tsv"
    path.write_bytes(content)
    with pytest.raises(BaselineError) as raised:
        load_baseline(path)
    assert str(raised.value).startswith(f"{path}") and "\n" not in str(raised.value)


@pytest.mark.parametrize(
    "nodeid",
    [
        "../../outside.py::test_x",
        "/etc/passwd::test_x",
        "tests/t.py::test_x[/../../x]",
        "t.py::test_ü[日本]",
        "t.py::test_" + "x" * 300,
        "..",
        "t.py::test[\x00\n]",
    ],
)
def test_a_case_directory_stays_inside_the_repro_directory(tmp_path: Path, nodeid: str) -> None:
    root = tmp_path / "repros"
    path = repro.write_case(_case(), root, repro.slugify(nodeid), OWNER)
    assert path.parent.parent == root and path.is_file()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["repros"]


PLANTED = "open({marker!r}, 'w').close()\n"


def test_a_planted_tensor_file_is_loaded_as_data_only(tmp_path: Path) -> None:
    path = repro.write_repro(_case(), tmp_path / "case" / "repro.py")
    (tensor,) = (path.parent / repro.TENSOR_DIR).iterdir()
    marker = tmp_path / "ran"

    class Payload:
        def __reduce__(self) -> tuple[Any, ...]:
            return (exec, (PLANTED.format(marker=str(marker)),))

    torch.save({"t": Payload()}, tensor)
    with pytest.raises(ReproBroken, match=r"Weights only load failed"):
        loading.load_repro(path)
    assert not marker.exists()


@pytest.mark.parametrize(
    "module",
    [
        "operator",
        "sitecustomize",
        # More of the same, a repro run twice each.
        pytest.param("inspect", marks=pytest.mark.slow),
        pytest.param("math", marks=pytest.mark.slow),
    ],
)
def test_a_module_planted_in_a_case_directory_is_not_imported(tmp_path: Path, module: str) -> None:
    path = repro.write_repro(_case(), tmp_path / "case" / "repro.py")
    marker = tmp_path / "imported"
    (path.parent / f"{module}.py").write_text(PLANTED.format(marker=str(marker)))
    loading.load_repro(path)
    for cwd in (tmp_path, path.parent):
        run = subprocess.run(
            [sys.executable, str(path)], capture_output=True, text=True, cwd=cwd, timeout=300
        )
        assert (run.returncode == 1 and "REPRODUCED" in run.stdout) or run.returncode in (0, 2), (
            run.stderr
        )
    assert not marker.exists()
