"""The command line tool's ``hunt`` verb: its arguments, checked before a program is drawn, and
its run. Importing it imports no torch (the tool's torch-free verbs start without torch)."""

from __future__ import annotations

import argparse
import ast
import sys
from pathlib import Path

from pytest_torchcompile.common.allowed import Number
from pytest_torchcompile.common.arguments import (
    DURATION,
    MINIFY_TIMEOUT,
    UsageError,
    directory,
    directory_to_write,
    setup_checked,
    taking,
)


def hunt_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--minutes", type=DURATION, default=10.0, help="time to draw programs for (default 10)"
    )
    parser.add_argument(
        "--seed", type=int, default=0, help="hypothesis' seed: one seed, one sequence of programs"
    )
    parser.add_argument(
        "--dir",
        type=directory_to_write,
        default=Path(".compile-accuracy-hunt"),
        help="where findings are written (default: .compile-accuracy-hunt)",
    )
    parser.add_argument(
        "--minify-timeout", type=MINIFY_TIMEOUT, default=120.0, help="seconds to minify one finding"
    )
    parser.add_argument(
        "--max-ops",
        type=taking(Number(whole=True, least=1)),
        default=6,
        help="the most steps of a program (default 6)",
    )
    parser.add_argument(
        "--known",
        type=directory,
        action="append",
        default=[],
        help="a repro directory of known cases: causes matching one are marked known",
    )
    parser.add_argument(
        "--intermediates",
        action="store_true",
        help="also probe each graph for masked deviations (slower)",
    )
    parser.add_argument(
        "--dtypes",
        # Empty items are kept for the verb to refuse: a value given is never [], all dtypes.
        type=lambda text: [name.strip() for name in text.split(",")],
        default=[],
        metavar="NAME,...",
        help="draw inputs of these dtypes only, e.g. float32,bfloat16 (default: all)",
    )
    parser.add_argument(
        "--specials",
        choices=("drawn", "always", "never"),
        default="drawn",
        help="floating inputs with NaN, infinities, -0.0 and subnormals among their values: "
        "one in four (drawn, the default), every one, or none",
    )
    parser.add_argument(
        "--inductor-config",
        type=_config_entry,
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="an Inductor config entry to hunt under, e.g. cpp_wrapper=True",
    )


def _config_entry(text: str) -> tuple[str, object]:
    key, equals, value = text.partition("=")
    if not equals or not key.strip():
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    try:
        return key.strip(), ast.literal_eval(value.strip())
    except (ValueError, SyntaxError):
        return key.strip(), value.strip()


def hunt(args: argparse.Namespace) -> int:
    # Imported when the verb runs: the command line tool imports this module for its arguments,
    # and its torch-free verbs (merge) start without torch.
    from pytest_torchcompile.hunting.hunt import DTYPES_BY_NAME, hunt_options
    from pytest_torchcompile.hunting.hunt import hunt as run_hunt
    from pytest_torchcompile.torch_internals.config import inductor_config_has

    _check_dtypes(args.dtypes, list(DTYPES_BY_NAME))
    missing = [key for key, _ in args.inductor_config if not inductor_config_has(key)]
    if missing:
        raise UsageError(
            f"--inductor-config: {missing[0]!r} is no key of this torch's Inductor config"
        )
    setup_checked()
    result = run_hunt(**hunt_options(args), progress=lambda line: print(line, file=sys.stderr))
    for line in result.lines():
        print(line)
    return 1 if any(cause.known is None for cause in result.causes) else 0


def _check_dtypes(names: list[str], known: list[str]) -> None:
    """Refuse ``--dtypes`` naming a dtype the hunt does not draw, or an empty name (``,,``),
    which would otherwise narrow nothing."""
    unknown = [name for name in names if name not in known]
    if unknown:
        said = "an empty name" if "" in unknown else f"unknown {', '.join(unknown)}"
        raise UsageError(f"--dtypes: {said}; known: {', '.join(known)}")
