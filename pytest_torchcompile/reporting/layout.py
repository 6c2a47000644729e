"""The terminal at hand: its width and verbosity, text wrapped to it (a path or a test id whole
where it fits), control characters escaped."""

from __future__ import annotations

import os
import re
import shutil
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from pytest_torchcompile.reporting.cells import printable

MAX_WIDTH = 120
"""The terminal section wraps its text to the terminal's width, and to no more than this."""


class _PathWrapper(textwrap.TextWrapper):
    """Breaks lines at spaces; a word longer than a line (a path, a test id) stays whole where
    the terminal has room for it, else breaks after its last ``/`` or ``::`` that fits, and only
    where none does, at the terminal's width."""

    def __init__(self, terminal_width: int, **options: Any) -> None:
        super().__init__(**options)
        self.terminal_width = terminal_width

    def _handle_long_word(
        self, reversed_chunks: list[str], cur_line: list[str], cur_len: int, width: int
    ) -> None:
        chunk = reversed_chunks[-1]
        room = width + self.terminal_width - self.width  # this line's, at the terminal's width
        if cur_len + len(chunk) <= room:
            cur_line.append(reversed_chunks.pop())
            return
        if cur_line and len(self.subsequent_indent) + len(chunk) <= self.terminal_width:
            return  # whole on the next line
        space_left = max(room - cur_len, 1)
        ends = [chunk.rfind("/", 0, space_left) + 1, chunk.rfind("::", 0, space_left - 1) + 2]
        end = max((end for end in ends if end > 1), default=0)
        if end == 0 and cur_line:
            return  # the word starts the next line, which has more room
        end = end or space_left
        cur_line.append(chunk[:end])
        reversed_chunks[-1] = chunk[end:]


_FIGURE_AND_UNIT = re.compile(r"(?<=\d) (?=(?:s|ms|ops?|compiles?|MiB|GiB)\b)")
"""The space between a figure and its unit (``13.5 s``, ``3 compiles``): never a line break."""
_KEPT_SPACE = "\ue000"
"""Stands for such a space while a line is wrapped: textwrap breaks at ASCII whitespace only."""


@dataclass(frozen=True)
class TerminalLayout:
    """How the terminal section is laid out for the terminal at hand."""

    width: int = 80
    """The terminal's width (pytest's); text wraps to it, and to no more than ``MAX_WIDTH``."""
    verbosity: int = 0
    """pytest's: 0 (and 1, ``-v``), a row per test and the details of failing checks; above 1,
    the details of every check too; -1 (``-q``), only the rows of failing tests; below -1, only
    the counts."""
    root: Path | None = None
    """Paths under this directory (the rootdir) are shown relative to it, as node ids are."""

    @classmethod
    def of(cls, config: pytest.Config) -> TerminalLayout:
        """The layout of pytest's terminal for ``config``'s run; before pytest's terminal is set up
        (at configure), or without one, the width pytest would take (``COLUMNS``, the terminal's)."""
        if config.pluginmanager.get_plugin("terminalreporter") is not None:
            width = config.get_terminal_writer().fullwidth
        else:
            width = shutil.get_terminal_size(fallback=(80, 24)).columns
        return cls(width, config.get_verbosity(), config.rootpath)

    @property
    def line_width(self) -> int:
        return max(min(self.width, MAX_WIDTH), 40)

    def shown(self, text: str) -> str:
        return text if self.root is None else text.replace(f"{self.root}{os.sep}", "")

    def public(self, text: str) -> str:
        """``text`` for what is read away from this machine (a bug report, a report a CI
        uploads): paths under the rootdir relative to it, as pytest names tests, and the home
        directory as ``~``, so that no absolute path of this machine is shown."""
        return self.shown(text).replace(f"{Path.home()}{os.sep}", f"~{os.sep}")

    def wrap(self, text: str, indent: str, width: int | None = None) -> list[str]:
        """``text`` wrapped to ``width`` (default: the text's width) at spaces; a path or test id
        longer than the terminal at a ``/`` or ``::``. Control characters are shown escaped."""
        lines = _PathWrapper(
            max(self.width, 40),
            width=width or self.line_width,
            initial_indent=indent,
            subsequent_indent=f"{indent}  ",
            break_on_hyphens=False,
        ).wrap(_FIGURE_AND_UNIT.sub(_KEPT_SPACE, printable(text)))
        return [line.replace(_KEPT_SPACE, " ") for line in lines]

    def fit(self, text: str) -> str:
        """Lines of ``text`` wider than the terminal wrapped as :meth:`wrap` does, each under its
        own indent."""
        width = max(self.width, 40)
        lines = []
        for line in map(printable, text.splitlines()):
            if len(line) <= width:
                lines.append(line)
            else:
                body = line.lstrip(" ")
                lines.extend(self.wrap(body, line[: len(line) - len(body)], width))
        return "\n".join(lines)
