"""Major or minor (docs/guides/versions.md, docs/concepts/consumers.md): pure functions of a
table's head revision.

The Dagster layer decides with them when it resolves a run's slice, and a remote job run by
hand (``revisions_assets.pipes``) decides with them too: one rule, wherever Spark runs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ..log.records import Revision


def decide_major(
    head: Revision | None,
    table: str,
    code_version: str | None,
    forced: bool,
    field_versions: Mapping[str, str] | None = None,
) -> tuple[bool, str]:
    """docs/guides/versions.md as a pure function of the table's head revision: (is_major, why)."""
    if forced:
        return True, "major forced by run tag or config"
    if head is None:
        return True, "first revision of the table"
    change = version_change(head, table, code_version, field_versions)
    if change is not None:
        return True, change
    return False, f"code version {code_version!r} unchanged since revision {head.sequence}"


def decide_consumer_major(
    head: Revision | None,
    table: str,
    code_version: str | None,
    forced: bool,
    resets: Sequence[str],
) -> tuple[bool, str, bool]:
    """A consumer's (is_major, why, soft): its own major (``decide_major``), else a soft major
    when an input was reset (``resets``: the inputs whose changes are a reset), else a minor."""
    is_major, reason = decide_major(head, table, code_version, forced)
    soft = bool(resets) and not is_major
    if soft:
        return True, f"upstream reset in {', '.join(resets)}", True
    return is_major, reason, False


def version_change(
    head: Revision, table: str, code_version: str | None, fields: Mapping[str, str] | None
) -> str | None:
    """Why ``head`` was not written by this code (a major is due), or None when it was: its
    code version differs, or a field's version (a declared one, or a recorded one now back
    at the code version) differs."""
    recorded = head.version_of(table)
    if recorded != code_version:
        return f"code version changed: {recorded!r} -> {code_version!r}"
    write = head.tables.get(table)
    fields = dict(fields or {})
    named = set(fields) | set((write.field_versions or {}) if write else {})
    bumped = {
        c: (write.field_version(c) if write else recorded, fields.get(c, code_version))
        for c in sorted(named)
    }
    bumped = {c: (old, new) for c, (old, new) in bumped.items() if old != new}
    if bumped:
        shown = ", ".join(f"{c} {old!r} -> {new!r}" for c, (old, new) in bumped.items())
        return f"field versions changed: {shown}"
    return None
