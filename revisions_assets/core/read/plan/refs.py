"""References to a point of the commit order: ``HEAD``, ``HEAD~n``, a revision name, a
sequence number. Pure functions of the log.

``HEAD~n`` counts data revisions back, never maintenance entries, among the revisions of
one table (as every read counts them, ``resolve_position``); a lookup of one entry without a
table (``find_revision``) counts the data revisions of every table.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from ...errors import (
    AmbiguousRevisionError,
    ArgumentTypeError,
    InvalidArgumentError,
    UnknownRevisionError,
)
from ...log.records import Revision
from ...log.view import table_revisions
from ...uris import describe, redact

Position = int | str | None
HEAD_PATTERN = re.compile(r"^HEAD(?:~(\d+))?$")


def resolve_position(records: Sequence[Revision], table: str, at: Position) -> int:
    """The highest sequence a read pinned ``at`` may see.

    ``None``/``"HEAD"``: everything; ``"HEAD~n"``: n data revisions back in the table's
    history (maintenance entries are not counted: ``revisions log ROOT --table T`` shows
    each revision's ref); a revision name or a unique prefix of one (at least
    ``MIN_PREFIX`` characters; all digits read as a sequence); or a sequence number.
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
        history = table_revisions(records, table)
        if back >= len(history):
            raise UnknownRevisionError(
                f"{at}: table {table!r} has {refs_span(len(history))}; maintenance entries "
                f"are not counted (`revisions log ROOT --table {table}` shows each ref)"
            )
        return head if back == 0 else history[-1 - back].sequence
    for record in records:
        if record.name == at:
            return record.sequence
    if at.isascii() and at.isdigit():
        return resolve_position(records, table, int(at))
    return named_by_prefix(records, at).sequence


#: the shortest revision-name prefix accepted for a name (as git abbreviates commits)
MIN_PREFIX = 4


def refs_span(count: int) -> str:
    """``8 data revisions (HEAD..HEAD~7)``: how many revisions ``HEAD~n`` can reach."""
    span = "HEAD" if count == 1 else f"HEAD..HEAD~{count - 1}"
    return f"{count} data revision{'s' if count != 1 else ''} ({span})"


def named_by_prefix(records: Sequence[Revision], prefix: str) -> Revision:
    """The one entry whose name starts with ``prefix``; UnknownRevisionError when none does
    (or the prefix is shorter than ``MIN_PREFIX``), AmbiguousRevisionError when several do."""
    shown = redact(repr(prefix))
    if len(prefix) < MIN_PREFIX:
        raise UnknownRevisionError(
            f"no revision named {shown} in this dataset (a name prefix needs at least "
            f"{MIN_PREFIX} characters)"
        )
    found = [r for r in records if r.name.startswith(prefix)]
    if not found:
        raise UnknownRevisionError(f"no revision named {shown} in this dataset")
    if len(found) > 1:
        candidates = ", ".join(f"{r.name} (sequence {r.sequence})" for r in found[:10])
        more = f" and {len(found) - 10} more" if len(found) > 10 else ""
        raise AmbiguousRevisionError(
            f"{shown} is the prefix of {len(found)} revision names: {candidates}{more}; "
            "give more characters"
        )
    return found[0]


def find_revision(records: Sequence[Revision], ref: Position, table: str | None = None) -> Revision:
    """An entry by name (or a unique prefix of one) or sequence, or a data revision by
    ``HEAD`` or ``HEAD~n``: n data revisions back among those of ``table`` (as reads count
    them), or of every table when none is given (the log's data revisions; the same when
    the dataset has one table). Maintenance entries are never counted."""
    match = HEAD_PATTERN.match(ref) if isinstance(ref, str) else None
    if match and table is not None:
        return records[resolve_position(records, table, ref) - 1]
    if match:
        data = [r for r in records if r.is_data]
        back = int(match.group(1) or 0)
        if not 0 <= back < len(data):
            raise UnknownRevisionError(
                f"{ref!r}: the log has {refs_span(len(data))}; maintenance entries are not "
                "counted (`revisions log ROOT` lists every entry)"
            )
        return data[-1 - back]
    index = resolve_position(records, "", ref) - 1
    if not 0 <= index < len(records):
        raise UnknownRevisionError(f"{ref!r}: no such revision (the log has {len(records)})")
    return records[index]
