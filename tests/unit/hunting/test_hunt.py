"""The hunt (pytest_torchcompile.hunting.hunt, ``python -m pytest_torchcompile hunt``): drawn
programs checked as the fixture checks them, failures minified and grouped by root cause."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from pytest_torchcompile.cli import main, parser
from pytest_torchcompile.hunting.causes import PROGRAM_NAME
from pytest_torchcompile.hunting.hunt import hunt, hunt_options
from pytest_torchcompile.hunting.program import ALL_DTYPES
from pytest_torchcompile.repros.reading import header_fields

RELU_BUG = {"cpp.inject_relu_bug_TESTING_ONLY": "accuracy"}


def test_the_command_takes_the_budget_seed_directory_and_config() -> None:
    args = parser().parse_args(
        [
            "hunt",
            "--minutes",
            "2.5",
            "--seed",
            "7",
            "--dir",
            "d",
            "--inductor-config",
            "cpp_wrapper=True",
            "--inductor-config",
            "cpp.inject_relu_bug_TESTING_ONLY=accuracy",
        ]
    )
    assert (args.minutes, args.seed, args.dir) == (2.5, 7, Path("d"))
    assert dict(args.inductor_config) == {
        "cpp_wrapper": True,
        "cpp.inject_relu_bug_TESTING_ONLY": "accuracy",
    }


def test_a_budget_that_is_not_positive_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stopped:
        main(["hunt", "--minutes", "0"])
    assert stopped.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1] == (
        "pytest-torchcompile hunt: error: argument --minutes: '0' is not allowed; "
        "expected a finite number > 0"
    )


def test_the_command_narrows_the_dtypes_and_special_values_drawn() -> None:
    args = parser().parse_args(["hunt", "--dtypes", "float32, bfloat16", "--specials", "always"])
    options = hunt_options(args)
    assert (options["dtypes"], options["specials"]) == ([torch.float32, torch.bfloat16], True)
    defaults = hunt_options(parser().parse_args(["hunt"]))
    assert (defaults["dtypes"], defaults["specials"]) == (ALL_DTYPES, None)


def test_an_unknown_dtype_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stopped:
        main(["hunt", "--dtypes", "float32,complex32"])
    assert stopped.value.code == 2
    assert "--dtypes: unknown complex32" in capsys.readouterr().err


@pytest.mark.parametrize("given", [",,", "", "float32,,bfloat16", " "])
def test_an_empty_dtype_name_is_a_usage_error(
    given: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Never taken for no narrowing: the hunt would draw every dtype."""
    with pytest.raises(SystemExit) as stopped:
        main(["hunt", "--dtypes", given, "--minutes", "0.001", "--dir", str(tmp_path)])
    assert stopped.value.code == 2
    assert capsys.readouterr().err.splitlines() == [
        "pytest-torchcompile hunt: error: --dtypes: an empty name; known: "
        + ", ".join(str(dtype).removeprefix("torch.") for dtype in ALL_DTYPES)
    ]


def test_a_short_hunt_checks_programs_and_counts_them(tmp_path: Path) -> None:
    """The lighter twin of test_the_hunt_finds_and_minifies_an_injected_bug: a budget of a few
    seconds, one-step programs, nothing minified."""
    result = hunt(
        0.05,
        tmp_path,
        seed=3,
        max_ops=1,
        minify_timeout=1,
        progress=lambda line: None,
        dtypes=[torch.float32],
        specials=True,
    )
    assert result.programs >= 1
    assert result.invalid == []
    assert result.findings == len([p for p in tmp_path.glob(f"*/{PROGRAM_NAME}")])
    assert all(len(line) <= 80 for line in result.lines()[:2])


@pytest.mark.slow
def test_the_hunt_finds_and_minifies_an_injected_bug(tmp_path: Path) -> None:
    """A relu that Inductor miscompiles (its test knob): found within five minutes (the first
    relu program of this seed is the 97th; a 2-core machine checks 30 to 70 a minute, as loaded),
    confirmed, minified to the relu, with a bug report and the program that showed it, as one
    cause.

    A fast machine draws far enough to meet other causes as well: real bugs of the installed
    torch (2.13 and 2.14: an ``index_add`` whose source is a slice of its own input,
    pytorch#156786, from the 197th program of this seed), and the knob's own C++ compile error
    where a 0-d int16 relu feeds ``clamp_max`` (the 206th program on torch 2.13): causes of their
    own, never the relu's accuracy failure."""
    lines: list[str] = []
    result = hunt(
        5.0, tmp_path, seed=0, minify_timeout=60, inductor_config=RELU_BUG, progress=lines.append
    )
    assert result.invalid == []
    assert result.findings >= 1
    relu_causes = [
        cause
        for cause in result.causes
        if "aten.relu" in cause.ops and cause.failure_type == "accuracy"
    ]
    assert len(relu_causes) == 1, result.lines()
    cause = relu_causes[0]
    assert cause.ops == ["aten.relu"]
    # Every finding is counted against its cause or listed as not reduced: on a loaded machine a
    # finding's own minification can run out of its minute.
    assert sum(len(c.programs) for c in result.causes) + len(result.unreduced) == result.findings
    assert cause.minified and header_fields(Path(cause.minified))["ops"] == "1"
    assert cause.bug_report and "relu" in Path(cause.bug_report).read_text()
    assert cause.program and Path(cause.program).read_text().startswith(
        "from math import inf, nan\n\nimport torch\n"
    )
    shown = "\n".join(result.lines())
    count = len(result.causes)
    assert f"distinct causes: {count} ({count} not known)" in shown and "minified:" in shown


@pytest.mark.slow
def test_a_cause_of_a_known_case_is_marked_known(tmp_path: Path) -> None:
    first = hunt(
        5.0,
        tmp_path / "first",
        seed=0,
        minify_timeout=60,
        inductor_config=RELU_BUG,
        progress=lambda line: None,
    )
    again = hunt(
        5.0,
        tmp_path / "again",
        seed=0,
        minify_timeout=60,
        inductor_config=RELU_BUG,
        known=[tmp_path / "first"],
        progress=lambda line: None,
    )
    assert [cause.known for cause in first.causes] == [None] * len(first.causes)
    # Each hunt draws as far as its budget goes: a cause the first hunt did not reach is not known.
    found_first = {
        (cause.failure_type, *sorted(cause.ops)): Path(cause.minified or "").parent.name
        for cause in first.causes
    }
    assert [cause.known for cause in again.causes] == [
        found_first.get((cause.failure_type, *sorted(cause.ops))) for cause in again.causes
    ]
    assert next(cause.known for cause in again.causes if cause.ops == ["aten.relu"]) is not None
