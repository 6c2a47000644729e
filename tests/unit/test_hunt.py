"""The hunt (pytest_torchcompile.hunt, ``python -m pytest_torchcompile hunt``): drawn programs
checked as the fixture checks them, failures minified and grouped by root cause."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_torchcompile.cli import main, parser
from pytest_torchcompile.hunt import PROGRAM_NAME, hunt
from pytest_torchcompile.repros.repro import header_fields

RELU_BUG = {"cpp.inject_relu_bug_TESTING_ONLY": "accuracy"}


def test_the_command_takes_the_budget_seed_directory_and_config() -> None:
    args = parser().parse_args(["hunt", "--minutes", "2.5", "--seed", "7", "--dir", "d",
                                "--inductor-config", "cpp_wrapper=True",
                                "--inductor-config", "cpp.inject_relu_bug_TESTING_ONLY=accuracy"])
    assert (args.minutes, args.seed, args.dir) == (2.5, 7, Path("d"))
    assert dict(args.inductor_config) == {"cpp_wrapper": True, "cpp.inject_relu_bug_TESTING_ONLY": "accuracy"}


def test_a_budget_that_is_not_positive_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stopped:
        main(["hunt", "--minutes", "0"])
    assert stopped.value.code == 2
    assert "--minutes must be positive" in capsys.readouterr().err


def test_a_short_hunt_checks_programs_and_counts_them(tmp_path: Path) -> None:
    """The lighter twin of test_the_hunt_finds_and_minifies_an_injected_bug: a budget of a few
    seconds, one-step programs, nothing minified."""
    result = hunt(0.05, tmp_path, seed=3, max_ops=1, minify_timeout=1, progress=lambda line: None)
    assert result.programs >= 1
    assert result.invalid == []
    assert result.findings == len([p for p in tmp_path.glob(f"*/{PROGRAM_NAME}")])
    assert all(len(line) <= 80 for line in result.lines()[:2])


@pytest.mark.slow
def test_the_hunt_finds_and_minifies_an_injected_bug(tmp_path: Path) -> None:
    """A relu that Inductor miscompiles (its test knob): found within a minute, confirmed,
    minified to the relu, with a bug report and the program that showed it, as one cause."""
    lines: list[str] = []
    result = hunt(1.0, tmp_path, seed=0, minify_timeout=60, inductor_config=RELU_BUG, progress=lines.append)
    assert result.invalid == []
    assert result.findings >= 1
    assert len(result.causes) == 1, result.lines()
    cause = result.causes[0]
    assert cause.ops == ["aten.relu"] and cause.failure_type == "accuracy"
    # Every finding is counted against its cause or listed as not reduced: on a loaded machine a
    # finding's own minification can run out of its minute.
    assert sum(len(c.programs) for c in result.causes) + len(result.unreduced) == result.findings
    assert cause.minified and header_fields(Path(cause.minified))["ops"] == "1"
    assert cause.bug_report and "relu" in Path(cause.bug_report).read_text()
    assert cause.program and Path(cause.program).read_text().startswith("import torch")
    shown = "\n".join(result.lines())
    assert "distinct causes: 1 (1 not known)" in shown and "minified:" in shown


@pytest.mark.slow
def test_a_cause_of_a_known_case_is_marked_known(tmp_path: Path) -> None:
    first = hunt(1.0, tmp_path / "first", seed=0, minify_timeout=60, inductor_config=RELU_BUG,
                 progress=lambda line: None)
    again = hunt(1.0, tmp_path / "again", seed=0, minify_timeout=60, inductor_config=RELU_BUG,
                 known=[tmp_path / "first"], progress=lambda line: None)
    assert [cause.known for cause in first.causes] == [None]
    assert [cause.known for cause in again.causes] == [Path(first.causes[0].minified or "").parent.name]
