"""The baseline file: its rows read and written.

Baseline file format
--------------------

A UTF-8 text file meant to be reviewed in diffs: one row per test id, sorted by test id, fields
separated by one tab character (shown as ``<TAB>`` here)::

    # pytest-torchcompile baseline v1
    tests/test_models.py::test_attention[bf16]<TAB>fail_accuracy<TAB>https://github.com/pytorch/pytorch/issues/12345
    tests/test_models.py::test_attention[fp32]<TAB>pass
    tests/test_models.py::test_layer_norm<TAB>flaky<TAB>depends on thread count

Each row is ``<test id><TAB><expected status>[<TAB><note>]``:

- *test id*: the pytest node id, exactly as pytest prints it. An id that a row cannot hold as
  it is (a tab or another control character, which pytest escapes unless its
  ``disable_test_id_escaping_and_forfeit_all_rights_to_community_support`` ini option is set;
  surrounding spaces; a leading ``#`` or ``"``) is written as a JSON string, ``"...\t..."``, and
  read back as the id it stands for.
- *expected status*: one of ``pass``, ``fail_accuracy``, ``fail_compile``, ``fail_runtime``,
  ``eager_nondeterministic``, ``out_of_memory``, ``unconfirmed``, ``handled_error``,
  ``inconclusive``, ``no_fp64_reference``, ``not_judged`` (see ``verdict.Status``), or
  ``flaky``: a flaky test never fails the run; its result is still shown. ``eager_fail`` is no
  expected status (see below).
- *note*: optional free text kept as written, e.g. a link to the upstream bug.

Blank lines and lines starting with ``#`` are ignored. The header line
``# pytest-torchcompile baseline v1`` is optional when writing the file by hand; a header naming
another version is rejected. Surrounding whitespace of each field is ignored, so a trailing space
after a status is harmless. Loading stops at the first problem with a ``BaselineError`` that
names the file and line: a row without a tab-separated status, an unknown status, a row
``eager_fail``, or a test id listed twice.

Rewriting the file (``write_baseline``) records this run's status of every test that ran a
check the baseline gates, keeps the rows of the other tests, keeps every note, and leaves
``flaky`` rows flaky. Comment lines other than the header are not preserved: put lasting remarks
in a row's note.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, TypeAlias

from pytest_torchcompile.common.files import NotARegularFile, TooLarge, atomic_write, read_bounded
from pytest_torchcompile.common.verdict import Status

FORMAT_VERSION = 1
HEADER = f"# pytest-torchcompile baseline v{FORMAT_VERSION}"
FLAKY: Literal["flaky"] = "flaky"

Expectation: TypeAlias = Status | Literal["flaky"]

_HEADER_PATTERN = re.compile(r"#\s*pytest-torchcompile baseline v(\d+)\s*$")
_ROW_SHAPE = "<test id><TAB><expected status>[<TAB><note>]"
# Characters a row cannot hold as they are: control characters and the line separators that
# str.splitlines() breaks lines at.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")

UNGATED_STATUSES = frozenset({Status.EAGER_FAIL})
"""Statuses the baseline neither records nor judges: the model's own error in its eager run fails
its test as a plain run does, whatever a row says; no verdict on the compiler."""


class BaselineError(Exception):
    """The baseline file cannot be read or written; the message names the file (and line)."""


@dataclass(frozen=True)
class BaselineEntry:
    test_id: str
    expected: Expectation
    note: str = ""
    line: int | None = None
    """Where the row was read from; None for rows made by ``write_baseline``."""

    @property
    def is_flaky(self) -> bool:
        return self.expected == FLAKY


@dataclass(frozen=True)
class Baseline:
    path: Path
    entries: Mapping[str, BaselineEntry]

    def get(self, test_id: str) -> BaselineEntry | None:
        return self.entries.get(test_id)


def _expectation(text: str, test_id: str, where: str) -> Expectation:
    """The expected status a row's field names; :class:`BaselineError` for a status unknown or
    one no baseline records (:data:`UNGATED_STATUSES`)."""
    if text == FLAKY:
        return FLAKY
    try:
        status = Status(text)
    except ValueError:
        allowed = ", ".join([*(str(s) for s in Status if s not in UNGATED_STATUSES), FLAKY])
        raise BaselineError(
            f"{where}: unknown status {text!r} for {test_id}; expected one of {allowed}"
        ) from None
    if status in UNGATED_STATUSES:
        raise BaselineError(
            f"{where}: {test_id} has status {status}, which no baseline records: the model's "
            "own error fails its test as a plain run does; delete the row"
        )
    return status


def _stored_test_id(test_id: str) -> str:
    """``test_id`` as a row holds it: as it is, or, where it would read back otherwise (a tab or
    another control character, surrounding spaces, a leading ``#`` or ``"``), as a JSON string.
    pytest escapes such characters in its ids unless told not to (its
    ``disable_test_id_escaping_and_forfeit_all_rights_to_community_support`` ini option)."""
    if (
        test_id
        and test_id == test_id.strip()
        and test_id[0] not in '#"'
        and not _CONTROL.search(test_id)
    ):
        return test_id
    return json.dumps(test_id)


def _read_test_id(field: str, where: str) -> str:
    """The test id a row's first field holds (see :func:`_stored_test_id`)."""
    if not field.startswith('"'):
        return field
    try:
        test_id = json.loads(field)
    except json.JSONDecodeError:
        test_id = None
    if not isinstance(test_id, str):
        raise BaselineError(f"{where}: test id {field} starts with a quote but is no JSON string")
    return test_id


def _parse_row(raw: str, path: Path, line: int) -> BaselineEntry:
    where = f"{path}:{line}"
    fields = [field.strip() for field in raw.split("\t", 2)]
    if len(fields) < 2 or not fields[0] or not fields[1]:
        raise BaselineError(f"{where}: malformed row {raw.strip()!r}: expected {_ROW_SHAPE}")
    test_id = _read_test_id(fields[0], where)
    expected = _expectation(fields[1], test_id, where)
    note = fields[2] if len(fields) == 3 else ""
    return BaselineEntry(test_id, expected, note, line)


def load_baseline(path: str | os.PathLike[str]) -> Baseline:
    """Read a baseline file; raise :class:`BaselineError` naming the file and line on any problem."""
    path = Path(path)
    try:
        text = _read_text(path)
    except FileNotFoundError:
        raise BaselineError(f"{path}: baseline file not found") from None
    except (OSError, UnicodeDecodeError) as error:
        raise BaselineError(f"{path}: cannot read baseline file: {error}") from error
    entries: dict[str, BaselineEntry] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        where = f"{path}:{number}"
        stripped = raw.strip()
        if stripped.startswith("#"):
            header = _HEADER_PATTERN.match(stripped)
            if header and int(header.group(1)) != FORMAT_VERSION:
                raise BaselineError(
                    f"{where}: baseline format v{header.group(1)} is not supported (this plugin reads v{FORMAT_VERSION})"
                )
            continue
        if not stripped:
            continue
        entry = _parse_row(raw, path, number)
        first = entries.get(entry.test_id)
        if first is not None:
            raise BaselineError(
                f"{where}: duplicate test id {entry.test_id} (first listed on line {first.line})"
            )
        entries[entry.test_id] = entry
    return Baseline(path, entries)


MAX_BYTES = 64 * 2**20
"""The largest baseline read: about half a million rows; a larger file is no baseline."""


def _read_text(path: Path) -> str:
    """The text of a regular file of at most :data:`MAX_BYTES`; a device, a pipe or a directory
    (which may never end: ``/dev/zero``) or a larger file raises :class:`BaselineError`."""
    try:
        data = read_bounded(path, MAX_BYTES)
    except NotARegularFile:
        raise BaselineError(f"{path}: not a regular file: a baseline is a text file") from None
    except TooLarge:
        raise BaselineError(
            f"{path}: larger than {MAX_BYTES // 2**20} MiB: not a baseline file"
        ) from None
    return data.decode("utf-8-sig")  # an editor's byte order mark is no row


def write_baseline(
    path: str | os.PathLike[str],
    statuses: Mapping[str, Status],
    previous: Baseline | None,
) -> None:
    """Record this run's statuses, keeping rows of tests that did not run, every note, and flaky
    rows flaky. Written atomically: readers see the old file or the new one, never a mix. A
    baseline that is a symbolic link stays one: the file it points to is rewritten."""
    path = resolved(path)
    entries: dict[str, BaselineEntry] = dict(previous.entries) if previous else {}
    for test_id, status in statuses.items():
        old = entries.get(test_id)
        if old is not None and old.is_flaky:
            continue
        entries[test_id] = BaselineEntry(test_id, status, old.note if old else "")
    atomic_write(path, format_baseline(entries.values()).encode())


def resolved(path: str | os.PathLike[str]) -> Path:
    """The file a baseline path names, through any symbolic links."""
    return Path(os.path.realpath(path))


def format_baseline(entries: Iterable[BaselineEntry]) -> str:
    """The file text for ``entries``: header, then one row per test, sorted by test id."""
    rows = [HEADER]
    for entry in sorted(entries, key=lambda entry: entry.test_id):
        row = f"{_stored_test_id(entry.test_id)}\t{entry.expected}"
        rows.append(f"{row}\t{entry.note}" if entry.note else row)
    return "\n".join(rows) + "\n"
