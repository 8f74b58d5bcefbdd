"""References to a point of the commit order: ``HEAD``, ``HEAD~n``, a revision name, a
sequence number. Pure functions of the log.

``HEAD~n`` counts data revisions back, never maintenance entries: in the table's own
history when a read names a table (``resolve_position``), in the whole log when a command
looks up one entry (``find_revision``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from ...errors import ArgumentTypeError, InvalidArgumentError, UnknownRevisionError
from ...log.records import Revision
from ...log.view import table_history
from ...uris import describe, redact

Position = int | str | None
HEAD_PATTERN = re.compile(r"^HEAD(?:~(\d+))?$")


def resolve_position(records: Sequence[Revision], table: str, at: Position) -> int:
    """The highest sequence a read pinned ``at`` may see.

    ``None``/``"HEAD"``: everything; ``"HEAD~n"``: n revisions back in the table's history;
    a revision name; or a sequence number.
    """
    head = records[-1].sequence if records else 0
    if at is None:
        return head
    if isinstance(at, bool) or not isinstance(at, int | str):
        raise ArgumentTypeError(
            f"at must be 'HEAD', 'HEAD~n', a revision name or a sequence number (int), "
            f"got {describe(at)}"
        )
    if isinstance(at, int):
        if at < 0:
            raise InvalidArgumentError(f"at={at}: a sequence number is >= 0")
        if at > head:
            raise UnknownRevisionError(f"sequence {at} is outside the log (1..{head})")
        return at
    match = HEAD_PATTERN.match(at)
    if match:
        back = int(match.group(1) or 0)
        history = table_history(records, table)
        if back >= len(history):
            raise UnknownRevisionError(f"{at}: table {table!r} has only {len(history)} revisions")
        return head if back == 0 else history[-1 - back].sequence
    for record in records:
        if record.name == at:
            return record.sequence
    if at.isascii() and at.isdigit():
        return resolve_position(records, table, int(at))
    raise UnknownRevisionError(f"no revision named {redact(repr(at))} in this dataset")


def find_revision(records: Sequence[Revision], ref: Position) -> Revision:
    """An entry by name or sequence, or a data revision by ``HEAD`` or ``HEAD~n`` (n data
    revisions back in the whole log; maintenance entries are not counted)."""
    match = HEAD_PATTERN.match(ref) if isinstance(ref, str) else None
    if match:
        data = [r for r in records if r.is_data]
        back = int(match.group(1) or 0)
        if not 0 <= back < len(data):
            raise UnknownRevisionError(
                f"{ref!r}: no such revision (the log has {len(data)} data revisions)"
            )
        return data[-1 - back]
    index = resolve_position(records, "", ref) - 1
    if not 0 <= index < len(records):
        raise UnknownRevisionError(f"{ref!r}: no such revision (the log has {len(records)})")
    return records[index]
