"""The README serves a user in at most 400 lines, the rest lives in docs/, and every relative link
of the README, the changelog and docs/ (its log included) reaches a file that exists (and, with an
anchor, a heading of that file)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).parents[2]
PAGES = [ROOT / "README.md", ROOT / "CHANGELOG.md", *sorted((ROOT / "docs").rglob("*.md"))]
LINK = re.compile(r"\]\(([^)\s]+)\)")


def anchors(page: Path) -> set[str]:
    """GitHub's anchors of a page's headings (outside code blocks)."""
    text = re.sub(r"^```.*?^```", "", page.read_text(), flags=re.M | re.S)
    headings = re.findall(r"^#+ (.+)$", text, flags=re.M)
    return {re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-") for heading in headings}


def test_the_readme_is_at_most_400_lines() -> None:
    lines = len((ROOT / "README.md").read_text().splitlines())
    assert lines <= 400, f"README.md has {lines} lines: move reference material to docs/"


def test_every_relative_link_reaches_a_file_and_its_heading() -> None:
    broken = []
    for page in PAGES:
        for target in LINK.findall(page.read_text()):
            if re.match(r"[a-z]+:", target):
                continue
            path, _, anchor = target.partition("#")
            linked = (page.parent / path).resolve() if path else page
            if not linked.exists() or (
                anchor and linked.suffix == ".md" and anchor not in anchors(linked)
            ):
                broken.append(f"{page.relative_to(ROOT)}: {target}")
    assert not broken, broken


# --- the README's claims, held to the code -------------------------------------------------------

README = ROOT / "README.md"
USAGE = ROOT / "docs" / "usage.md"


def bash_blocks(page: Path) -> list[str]:
    return re.findall(r"^```bash\n(.*?)^```", page.read_text(), flags=re.M | re.S)


def test_ci_runs_the_readmes_test_command_verbatim() -> None:
    (test_command,) = [
        line
        for block in bash_blocks(README)
        for line in block.splitlines()
        if line.endswith("python3 -m pytest -n 2")
    ]
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    # Its exit status kept (`|| status=$?`), so that CI can tell "no tests collected" apart.
    assert any(line.startswith(f"{test_command} || ") for line in ci)


def test_the_readmes_demo_runs_the_examples() -> None:
    (demo,) = [
        line
        for block in bash_blocks(README)
        for line in block.splitlines()
        if "pytest examples" in line
    ]
    assert demo.startswith("python3 -m pip install -q -c constraints.txt -e . && ")
    assert (ROOT / "examples").is_dir()


def test_the_readme_says_what_the_test_command_collects() -> None:
    """The default run (``pyproject.toml``'s ``-m 'not slow and not realbugs'``) collects the
    unit tests, the GPU tests (skipped without a GPU) and the runs marked ``stops_a_run``: the
    README names each of them."""
    text = " ".join(README.read_text().split())
    stopping = sorted(
        path.relative_to(ROOT).as_posix()
        for path in (ROOT / "tests" / "runs").glob("test_*.py")
        if "@pytest.mark.stops_a_run" in path.read_text()
    )
    assert stopping, "no run marked stops_a_run: the README's sentence needs updating"
    for named in ["tests/unit", "tests/gpu", *stopping]:
        assert f"`{named}`" in text, f"the README's test command paragraph does not name {named}"


def test_every_verb_is_in_the_verb_table() -> None:
    from pytest_torchcompile.cli import VERBS

    table = re.findall(r"^\| `(\w+)[ `]", USAGE.read_text(), flags=re.M)
    assert [verb.name for verb in VERBS if verb.name not in table] == []


def test_every_option_is_in_the_option_table() -> None:
    from pytest_torchcompile.common.options import OPTIONS

    text = USAGE.read_text()
    assert [option.name for option in OPTIONS if f"`--{option.name}" not in text] == []


def test_the_baseline_statuses_listed_are_every_status_a_baseline_records() -> None:
    from pytest_torchcompile.common.verdict import Status
    from pytest_torchcompile.reporting.baseline_file import UNGATED_STATUSES

    reports = (ROOT / "docs" / "reports.md").read_text()
    listed = reports.split("the status is one of the statuses", 1)[1].split("or `flaky`", 1)[0]
    recorded = [status for status in Status if status not in UNGATED_STATUSES]
    assert [str(status) for status in recorded if f"`{status}`" not in listed] == []
    assert [str(status) for status in UNGATED_STATUSES if f"`{status}`" in listed] == []


def test_the_junit_properties_are_listed_with_those_that_hold_absolute_paths() -> None:
    """docs/reports.md names every property a check carries, and as absolute paths exactly
    those the writer keeps absolute: the rest are messages, relative to the rootdir."""
    from pytest_torchcompile.common.results import CaseResult, MinifyResult, StopReason
    from pytest_torchcompile.common.verdict import Status
    from pytest_torchcompile.reporting.junit import PATH_PROPERTIES, junit_properties

    every = CaseResult(
        "t.py::t",
        Status.UNCONFIRMED,
        case_id="c",
        worst_ratio=2.0,
        repro_path="/r/repro.py",
        graphs_judged=1,
        unconfirmed="not reproduced",
        unchecked=["graph 1: random ops"],
        minify=MinifyResult(2, 1, 1.0, 1, StopReason.MINIMAL, path="/r/minified.py"),
    )
    written = [name for name, _ in junit_properties(every, str)]
    section = (ROOT / "docs" / "reports.md").read_text().split("## JUnit and GitHub", 1)[1]
    listed = " ".join(section.split("- When `GITHUB_STEP_SUMMARY`", 1)[0].split())
    assert [name for name in written if f"`{name}`" not in listed] == []
    absolute = listed.split("Of these, ", 1)[1].split(" hold absolute paths", 1)[0]
    assert set(re.findall(r"`(\w+)`", absolute)) == PATH_PROPERTIES
