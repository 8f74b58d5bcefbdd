"""Whether the files of a log entry hold what the entry records: readable Parquet footers
(``storage/footer.py``) and the row counts the log records. No Spark, no data read.

Vacuum checks the files that stand for what it deletes with these (``vacuum.py``), and
``verify`` every live file: a truncated or replaced file fails here, before anything is
deleted on the strength of it.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, MutableMapping

from ..log.records import COMPACTION, Revision, TableWrite
from ..read.execute.files import footer_disagreement, not_parquet
from ..storage.base import Storage
from ..storage.footer import StoredFile, stored_file
from .findings import Finding


def write_findings(
    storage: Storage,
    record: Revision,
    table: str,
    checked: MutableMapping[str, StoredFile],
) -> list[Finding]:
    """What is wrong with the files ``record`` references for ``table``: missing, not
    Parquet, or together holding another number of rows than it records. ``checked``
    caches each file's state (files are immutable)."""
    write = record.tables[table]
    states = []
    for path in write.files:
        if path not in checked:
            checked[path] = stored_file(storage, path)
        states.append(checked[path])
    what = f"{record.kind} {record.name!r} (sequence {record.sequence}), table {table!r}"
    if record.kind == COMPACTION:
        return _compaction_findings(record, table, states, what)
    findings = []
    for state in states:
        if state.problem == "missing":
            message = f"data file {state.path} of revision {record.name!r} (sequence "
            message += f"{record.sequence}), table {table!r}, is missing"
            findings.append(Finding.of("missing_file", state.path, message))
        elif state.problem is not None:
            message = not_parquet(record.name, table, state.path, state.problem)
            findings.append(Finding.of("corrupt_file", state.path, message))
    wrong = _disagreement(write, states)
    if wrong is not None:
        findings.append(Finding.of("row_count_mismatch", record.name, f"{what}: {wrong}"))
    return findings


def rebuilt(records: Iterable[Revision], removed: Collection[int]) -> dict[str, Revision]:
    """Each compaction a later one rebuilt (``properties["rebuilds"]``) -> that one, while
    it is not removed: reads use it instead, whatever is wrong with the old one."""
    return {
        r.properties["rebuilds"]: r
        for r in records
        if r.kind == COMPACTION and "rebuilds" in r.properties and r.sequence not in removed
    }


def as_replaced(findings: Iterable[Finding], by: Revision) -> list[Finding]:
    """The damage of a compaction ``by`` rebuilt: harmless, no read uses it any more."""
    return [
        Finding.of(
            "compaction_replaced",
            f.path,
            f"{f.message}; compaction {by.name!r} (sequence {by.sequence}) rebuilt it and reads "
            "use that one",
        )
        for f in findings
    ]


def _compaction_findings(
    record: Revision, table: str, states: list[StoredFile], what: str
) -> list[Finding]:
    """One finding for a damaged compaction: what is wrong with each of its bad files."""
    problems = [
        f"{s.path} is {s.problem}" if s.problem == "missing" else f"{s.path}: {s.problem}"
        for s in states
        if s.problem is not None
    ]
    wrong = _disagreement(record.tables[table], states)
    if wrong is not None:
        problems.append(wrong)
    if not problems:
        return []
    message = f"{what} is damaged: {'; '.join(problems)}"
    return [Finding.of("compaction_damaged", record.name, message)]


def _disagreement(write: TableWrite, states: list[StoredFile]) -> str | None:
    """What the footers of files that are all readable say against the log
    (``footer_disagreement``, as the file gate of reads and rewrites compares them); None
    when they agree, or when a file is not readable (a finding of its own)."""
    if any(s.rows is None for s in states):
        return None
    wrong = footer_disagreement(write.files, write.rows, {s.path: s for s in states})
    return (
        None
        if wrong is None
        else f"its files hold {wrong.held} rows, the log records {wrong.recorded}"
    )


__all__ = ["as_replaced", "rebuilt", "write_findings"]
