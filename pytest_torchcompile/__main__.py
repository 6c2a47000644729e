"""``pytest-torchcompile minify REPRO``: minify a repro file outside a test run (one someone
attached to a bug report, say), with the same reducer the plugin uses."""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from .minify import MinifyProgress, minify_repro


def _show(progress: MinifyProgress) -> None:
    print(f"\r{progress.ops_left} ops left, {progress.compiles} compiles, {progress.elapsed_s:.1f} s",
          end="", file=sys.stderr, flush=True)


def main(argv: Sequence[str] | None = None) -> int:
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
    result = minify_repro(args.repro, timeout_s=args.timeout, progress=_show,
                          isolate=not args.no_isolate, device=args.device)
    print(file=sys.stderr)
    if args.result_json is not None:
        args.result_json.write_text(json.dumps(dataclasses.asdict(result)))
    print(result.summary_line(str(args.repro)))
    if result.note:
        print(result.note)
    if result.path is None:
        return 1
    print(f"minified: {result.path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
