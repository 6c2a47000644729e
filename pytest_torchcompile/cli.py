"""``python -m pytest_torchcompile VERB`` (or ``pytest-torchcompile VERB``): work with the cases
of a repro directory (``.compile-accuracy`` by default) outside a test run.

Each verb is one entry of :data:`VERBS`: its arguments and the function that runs it, which
returns the exit status. Without a verb, the usage and the verbs are printed (exit status 2).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import textwrap
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from pytest_torchcompile.common.arguments import (
    DURATION,
    MINIFY_TIMEOUT,
    UsageError,
    setup_checked,
)
from pytest_torchcompile.common.files import BUG_REPORT_NAME, MINIFIED_NAME, REPRO_NAME
from pytest_torchcompile.common.results import MinifyProgress, ProgressThrottle, StopReason
from pytest_torchcompile.hunting.verb import hunt, hunt_arguments
from pytest_torchcompile.reporting.layout import TerminalLayout
from pytest_torchcompile.run.merge import merge, merge_arguments, merge_usage_error

PROG = "pytest-torchcompile"
DEFAULT_DIR = Path(".compile-accuracy")

EXIT_STATUSES = {
    StopReason.MINIMAL: 0,
    StopReason.TIME_BUDGET: 0,
    StopReason.NOT_REPRODUCED: 1,
    StopReason.REPRO_BROKEN: 3,
    StopReason.CRASHED: 1,
    StopReason.INTERRUPTED: 1,
    StopReason.SPREAD: 1,
    StopReason.UNWRITTEN: 1,
}
"""``minify``'s exit status by why it stopped."""

RERUN_OUTCOMES = {0: "fixed", 1: "reproduced", 2: "fails differently", 3: "cannot run"}
"""A repro file's exit status (``python repro.py``) in words."""

NOT_A_REPRO = 4
"""``rerun``'s outcome, and exit status, for a file that is no repro of pytest-torchcompile: it
is not run."""

RERUN_WORDS = {**RERUN_OUTCOMES, NOT_A_REPRO: "not a repro"}

RERUN_PRECEDENCE = (1, 2, 3, NOT_A_REPRO, 0)
"""``rerun``'s exit status: the first of these outcomes that any file had."""


def _cuda_device(text: str) -> str:
    if re.fullmatch(r"cuda:\d+", text) is None:
        raise argparse.ArgumentTypeError(f"{text!r} is not allowed; expected cuda:N, e.g. cuda:1")
    return text


@dataclass(frozen=True)
class Verb:
    name: str
    summary: str
    examples: tuple[str, ...]
    arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int]
    exit_status: str = ""

    def epilog(self) -> str:
        examples = "\n".join(
            f"  {PROG} {self.name} {example}".rstrip() for example in self.examples
        )
        exit_status = (
            f"\n\n{textwrap.fill(f'exit status: {self.exit_status}', 78)}"
            if self.exit_status
            else ""
        )
        return f"examples:\n{examples}{exit_status}"


# --- the repro directory ----------------------------------------------------------------------


def _case_dirs(root: Path) -> list[Path]:
    return sorted(path.parent for path in root.glob(f"*/{REPRO_NAME}"))


def _case_dir(given: Path) -> Path:
    """A case directory from a case's directory, its name under the default directory, or one
    of its files."""
    for candidate in (given, DEFAULT_DIR / given, given.parent):
        # Whatever is there (a pipe included) is the case's: its header says whether it is a repro.
        if os.path.lexists(candidate / REPRO_NAME):
            return candidate
    raise UsageError(f"no case at {given} (a directory holding {REPRO_NAME}; see '{PROG} list')")


def _repros_of(root: Path) -> list[Path]:
    if not root.is_dir():
        raise UsageError(
            f"no repro directory {root} (run pytest with --compile-accuracy first, "
            "or name the directory)"
        )
    return _case_dirs(root)


# --- verbs -------------------------------------------------------------------------------------


def _list_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "directory",
        nargs="?",
        type=Path,
        default=DEFAULT_DIR,
        help=f"the repro directory (default: {DEFAULT_DIR})",
    )


def list_cases(args: argparse.Namespace) -> int:
    # Imported by the verb that needs it: the torch-free verbs (merge) start without torch.
    from pytest_torchcompile.repros.reading import NotARepro, header_fields

    layout = TerminalLayout(shutil.get_terminal_size().columns)
    listed = skipped = 0
    for case in _repros_of(args.directory):
        minified = case / MINIFIED_NAME
        try:
            fields = header_fields(case / REPRO_NAME)
        except NotARepro as error:
            skipped += 1
            lines = [(f"{case.name}  not a repro ({error})", "")]
        else:
            listed += 1
            try:
                shrunk = (
                    f", minified to {header_fields(minified)['ops']} ops"
                    if os.path.lexists(minified)
                    else ""
                )
            except NotARepro as error:
                shrunk = f"; {MINIFIED_NAME} not a repro: {error}"
            status = fields["status"].split(":")[0]
            lines = [
                (f"{case.name}  {status}  ({fields['ops']} ops{shrunk})", ""),
                (fields["case"], "  "),
            ]
        for text, indent in lines:
            for line in layout.wrap(text, indent):
                print(line)
    skipped_note = f", {skipped} not a repro" if skipped else ""
    for line in layout.wrap(f"{listed} case(s) in {args.directory}{skipped_note}", ""):
        print(line)
    return 0


def _rerun_arguments(parser: argparse.ArgumentParser) -> None:
    _list_arguments(parser)
    parser.add_argument(
        "--minified",
        action="store_true",
        help=f"run a case's {MINIFIED_NAME} where it has one (faster), else its {REPRO_NAME}",
    )
    parser.add_argument(
        "--timeout", type=DURATION, default=600.0, help="seconds for one repro (default 600)"
    )


def _run_repro(path: Path, timeout_s: float) -> int | None:
    """The exit status of ``python REPRO`` in its case directory; None where it ran past
    ``timeout_s``. Whatever it started (Inductor's compile workers, a process of its own) ends
    with it: it runs in a session of its own, killed whole."""
    process = subprocess.Popen(
        [sys.executable, path.name],
        cwd=path.parent,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        return process.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return None
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()


def rerun(args: argparse.Namespace) -> int:
    outcomes: Counter[int] = Counter()
    for case in _repros_of(args.directory):
        path = (
            case / MINIFIED_NAME
            if args.minified and os.path.lexists(case / MINIFIED_NAME)
            else case / REPRO_NAME
        )
        outcome, said = _rerun_one(path, args.timeout)
        outcomes[outcome] += 1
        print(f"{said}: {case / path.name}")
    print(
        ", ".join(
            f"{outcomes[status]} {RERUN_WORDS[status]}"
            for status in RERUN_PRECEDENCE
            if outcomes[status]
        )
        or "no repros"
    )
    return next((status for status in RERUN_PRECEDENCE if outcomes[status]), 0)


def _rerun_one(path: Path, timeout_s: float) -> tuple[int, str]:
    """The outcome of running one repro file, or :data:`NOT_A_REPRO` for a file that is none (not
    run), and what is said of it."""
    why = _not_a_repro(path)
    if why is not None:
        return NOT_A_REPRO, f"{RERUN_WORDS[NOT_A_REPRO]} ({why})"
    status = _run_repro(path, timeout_s)
    timed_out = f" (timed out after {timeout_s:g} s)" if status is None else ""
    outcome = status if status in RERUN_OUTCOMES else 3
    return outcome, f"{RERUN_WORDS[outcome]}{timed_out}"


def _minify_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("repro", type=Path)
    parser.add_argument(
        "--timeout", type=MINIFY_TIMEOUT, default=300.0, help="time budget in seconds"
    )
    parser.add_argument(
        "--no-isolate",
        action="store_true",
        help="judge candidates in this process (faster start, no crash isolation)",
    )
    parser.add_argument(
        "--device",
        type=_cuda_device,
        default=None,
        help="CUDA device for the candidates, e.g. cuda:1",
    )
    parser.add_argument(
        "--result-json",
        type=Path,
        default=None,
        help="also write the result (ops before and after, time, paths) to this JSON file",
    )


class ProgressLine:
    """Minify progress on ``stream``: one line rewritten in place on a terminal; elsewhere (a
    log, a pipe) a plain line every ``PROGRESS_EVERY_S``, as carriage returns would run the
    lines together."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.live = stream.isatty()
        self.due = ProgressThrottle()

    def __call__(self, progress: MinifyProgress) -> None:
        if self.live:
            self.stream.write(f"\r{progress.describe()}")
        elif self.due():
            self.stream.write(f"minifying: {progress.describe()}\n")
        else:
            return
        self.stream.flush()

    def close(self) -> None:
        if self.live:
            self.stream.write("\n")
            self.stream.flush()


def minify(args: argparse.Namespace) -> int:
    # Imported by the verb that needs it: the torch-free verbs (merge) start without torch.
    from pytest_torchcompile.minifying.repro_file import minify_repro

    # A repro is imported by its path, which Python's import machinery takes only with .py.
    if args.repro.suffix != ".py":
        raise UsageError(f"{args.repro} is no repro file: its name does not end in .py")
    if not os.path.lexists(args.repro):
        raise UsageError(f"no such repro file: {args.repro}")
    setup_checked()
    if args.device is not None:
        # Here, not at the top: the torch-free verbs (merge) start without torch.
        import torch

        visible = torch.cuda.device_count()
        if int(args.device.removeprefix("cuda:")) >= visible:
            raise UsageError(f"--device {args.device}: no such device ({visible} CUDA visible)")
    # Told from its header before anything of it runs: minifying imports the file.
    why = _not_a_repro(args.repro)
    if why is not None:
        raise UsageError(f"{args.repro} is no repro file of pytest-torchcompile: {why}")
    progress = ProgressLine(sys.stderr)
    result = minify_repro(
        args.repro,
        timeout_s=args.timeout,
        progress=progress,
        isolate=not args.no_isolate,
        device=args.device,
    )
    progress.close()
    if args.result_json is not None:
        args.result_json.write_text(json.dumps(dataclasses.asdict(result)))
    print(result.summary_line(str(args.repro)))
    if result.path is not None:
        if result.note:
            print(result.note)
        print(f"minified: {result.path}")
    return EXIT_STATUSES[result.stop]


def _report_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "case",
        type=Path,
        help=f"a case directory, its name under {DEFAULT_DIR}, or one of its files",
    )


def _not_a_repro(path: Path) -> str | None:
    """Why ``path`` is no repro file of pytest-torchcompile, told from its header comments
    without running it (a repro's states its case, status and ops), or None."""
    # Imported by the verbs that need it: the torch-free verbs (merge) start without torch.
    from pytest_torchcompile.repros.reading import NotARepro, header_fields

    try:
        header_fields(path)
    except NotARepro as error:
        return str(error)
    return None


def report(args: argparse.Namespace) -> int:
    # Imported by the verb that needs it: the torch-free verbs (merge) start without torch.
    from pytest_torchcompile.judging.judge import ReproBroken
    from pytest_torchcompile.repros.bug_report import bug_report
    from pytest_torchcompile.repros.reading import repro_source

    case = _case_dir(args.case)
    repro, written = case / REPRO_NAME, case / BUG_REPORT_NAME
    why = _not_a_repro(repro)
    if why is not None:
        raise UsageError(f"{repro} is no repro file of pytest-torchcompile: {why}")
    try:
        print(repro_source(written) if os.path.lexists(written) else bug_report(repro))
    except ReproBroken as error:
        raise UsageError(f"{case}: {error}") from None
    return 0


def _merge(args: argparse.Namespace) -> int:
    problem = merge_usage_error(args)
    if problem is not None:
        raise UsageError(problem)
    return merge(args)


VERBS: tuple[Verb, ...] = (
    Verb(
        "list",
        "list the cases of a repro directory with their status",
        ("", "build/.compile-accuracy"),
        _list_arguments,
        list_cases,
    ),
    Verb(
        "rerun",
        "run every repro of a directory; say which still reproduce",
        (
            "                      # after upgrading torch: which bugs are fixed?",
            "--minified --timeout 120",
        ),
        _rerun_arguments,
        rerun,
        "1 if any repro still reproduces, else 2 if any fails another way, else 3 if any cannot "
        "run, else 4 if a file is no repro of pytest-torchcompile (it is not run), else 0 (all "
        "fixed)",
    ),
    Verb(
        "minify",
        "write minified.py beside a repro.py",
        (
            ".compile-accuracy/tests_test_model.py__test_mlp/repro.py",
            "repro.py --timeout 600 --device cuda:1",
        ),
        _minify_arguments,
        minify,
        "0 once minified.py is written, 1 when nothing was, 2 when the file is no repro of "
        "pytest-torchcompile (it is not run), 3 when the repro cannot run",
    ),
    Verb(
        "report",
        "print a bug report (Markdown) for a case",
        (
            "tests_test_model.py__test_mlp",
            ".compile-accuracy/tests_test_model.py__test_mlp > issue.md",
        ),
        _report_arguments,
        report,
        "0 once printed, 2 when the case is no repro of pytest-torchcompile or one of its files "
        "cannot be read",
    ),
    Verb(
        "merge",
        "judge the JSON reports of a split run's shards as one run, and merge their repros",
        (
            "shard-*/report.json --baseline compile-accuracy-baseline.txt --junit merged.xml",
            "shard-*/report.json --repros shard-*/.compile-accuracy --into .compile-accuracy",
        ),
        merge_arguments,
        _merge,
        "as the unsharded run's would be; 4 when the reports cannot be merged (one line says why)",
    ),
    Verb(
        "hunt",
        "check drawn torch programs for a time budget; print each root cause found",
        ("--minutes 30", "--minutes 5 --seed 7 --dir hunt --known .compile-accuracy"),
        hunt_arguments,
        hunt,
        "1 when a cause not known was found, else 0",
    ),
)


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(
        prog=PROG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Work with the repro files a --compile-accuracy run wrote.",
        epilog="examples:\n" + "\n".join(f"  {PROG} {verb.name} --help" for verb in VERBS),
    )
    verbs = top.add_subparsers(dest="verb", metavar="VERB", title="verbs")
    for verb in VERBS:
        sub = verbs.add_parser(
            verb.name,
            help=verb.summary,
            description=verb.summary,
            formatter_class=argparse.RawDescriptionHelpFormatter,
            epilog=verb.epilog(),
        )
        verb.arguments(sub)
        sub.set_defaults(run=verb.run)
    return top


def main(argv: Sequence[str] | None = None) -> int:
    cli = parser()
    args = cli.parse_args(argv)
    if args.verb is None:
        cli.print_help()
        return 2
    run: Callable[[argparse.Namespace], int] = args.run
    try:
        return run(args)
    except UsageError as error:
        cli.exit(2, f"{PROG} {args.verb}: error: {error}\n")
