"""Whether the files of a log entry hold what the entry records: readable Parquet footers
(``storage/footer.py``) and the row counts the log records. No Spark, no data read.

Vacuum checks the files that stand for what it deletes with these (``vacuum.py``), and
``verify`` every live file: a truncated or replaced file fails here, before anything is
deleted on the strength of it.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, MutableMapping

from ..log.records import COMPACTION, Revision
from ..read.execute.files import not_parquet
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
            message = not_parquet(record.name, table, state.path)
            if not state.problem.startswith("its last bytes"):
                message = message.replace("(its last bytes are not PAR1)", f"({state.problem})")
            findings.append(Finding.of("corrupt_file", state.path, message))
    stored = _stored_rows(states)
    if stored is not None and stored != write.rows:
        message = f"{what}: its files hold {stored} rows, the log records {write.rows}"
        findings.append(Finding.of("row_count_mismatch", record.name, message))
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
    stored = _stored_rows(states)
    rows = record.tables[table].rows
    if stored is not None and stored != rows:
        problems.append(f"its files hold {stored} rows, the log records {rows}")
    if not problems:
        return []
    message = f"{what} is damaged: {'; '.join(problems)}"
    return [Finding.of("compaction_damaged", record.name, message)]


def _stored_rows(states: list[StoredFile]) -> int | None:
    """The rows of files that are all readable; None when one is not."""
    if any(s.rows is None for s in states):
        return None
    return sum(s.rows or 0 for s in states)


__all__ = ["as_replaced", "rebuilt", "write_findings"]
