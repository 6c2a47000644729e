"""Where a compiled graph's code lives: the innermost frame of the user's code, outside torch,
pytest, Python's own modules and this plugin."""

from __future__ import annotations

import sysconfig
import traceback

_LIBRARY_PARTS = ("/torch/", "/pytest_torchcompile/", "/_pytest/", "/pluggy/")


def _is_library(name: str, python_own: tuple[str, ...], installed: tuple[str, ...]) -> bool:
    """Whether a frame's file (``/``-separated) is torch's, this plugin's, pytest's or Python's own
    (``contextlib`` wraps the functions Inductor compiles under ``options=`` or ``mode=``), not
    the user's."""
    if name.startswith("<frozen ") or any(part in name for part in _LIBRARY_PARTS):
        return True
    return name.startswith(python_own) and not name.startswith(installed)


def user_frame() -> str:
    """The innermost stack frame outside the libraries: where the compiled code lives."""
    paths = {key: value.replace("\\", "/") + "/" for key, value in sysconfig.get_paths().items()}
    python_own, installed = (
        (paths["stdlib"], paths["platstdlib"]),
        (paths["purelib"], paths["platlib"]),
    )
    for frame in reversed(traceback.extract_stack()):
        name = frame.filename.replace("\\", "/")
        if not _is_library(name, python_own, installed):
            return f"{name}:{frame.lineno} ({frame.name})"
    return "<unknown>"
