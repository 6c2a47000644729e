"""``pytest-torchcompile minify REPRO``: minify a repro file outside a test run (one someone
attached to a bug report, say), with the same reducer the plugin uses. ``pytest-torchcompile
merge REPORT...``: judge the reports of a split run's shards as one run (``run.merge``).

Exit status: 0 once ``minified.py`` is written (minimal, or the best found within the budget),
1 when nothing was (the repro does not reproduce, the minifier crashed), 2 for a usage error,
3 when the repro itself cannot run, as the repro's own exit status says.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TextIO

from pytest_torchcompile.run.merge import merge_main
from pytest_torchcompile.run.results import MinifyProgress, ProgressThrottle, StopReason

EXIT_STATUSES = {
    StopReason.MINIMAL: 0, StopReason.TIME_BUDGET: 0, StopReason.NOT_REPRODUCED: 1,
    StopReason.REPRO_BROKEN: 3, StopReason.CRASHED: 1, StopReason.INTERRUPTED: 1,
}


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


def main(argv: Sequence[str] | None = None) -> int:
    arguments = list(sys.argv[1:] if argv is None else argv)
    if arguments[:1] == ["merge"]:
        return merge_main(arguments[1:])
    # Here, not above: the merge of reports does not import torch.
    from pytest_torchcompile.minifying.search import minify_repro

    parser = argparse.ArgumentParser(prog="pytest-torchcompile")
    commands = parser.add_subparsers(dest="command", required=True)
    minify = commands.add_parser("minify", help="write minified.py beside a repro.py")
    minify.add_argument("repro", type=Path)
    minify.add_argument("--timeout", type=float, default=300.0, help="time budget in seconds")
    minify.add_argument("--no-isolate", action="store_true",
                        help="judge candidates in this process (faster start, no crash isolation)")
    minify.add_argument("--device", default=None, help="CUDA device for the candidates, e.g. cuda:1")
    minify.add_argument("--result-json", type=Path, default=None,
                        help="also write the result (ops before and after, time, paths) to this JSON file")
    args = parser.parse_args(argv)
    if not args.repro.is_file():
        parser.error(f"no such repro file: {args.repro}")
    progress = ProgressLine(sys.stderr)
    result = minify_repro(args.repro, timeout_s=args.timeout, progress=progress,
                          isolate=not args.no_isolate, device=args.device)
    progress.close()
    if args.result_json is not None:
        args.result_json.write_text(json.dumps(dataclasses.asdict(result)))
    print(result.summary_line(str(args.repro)))
    if result.path is not None:
        if result.note:
            print(result.note)
        print(f"minified: {result.path}")
    return EXIT_STATUSES[result.stop]


if __name__ == "__main__":
    sys.exit(main())
