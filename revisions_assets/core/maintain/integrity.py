"""Whether the files of a log entry hold what the entry records: readable Parquet footers
(``storage/footer.py``), each file the one its commit recorded where the entry records its
stats (``stats_difference``, as the file gate of reads compares it), and the row counts
the log records. No Spark, no data read.

Vacuum checks the files that stand for what it deletes with these (``vacuum.py``), and
``verify`` every live file: a truncated or replaced file fails here, before anything is
deleted on the strength of it.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, MutableMapping

from ..log.file_stats import read_footer, stats_difference
from ..log.records import COMPACTION, Revision, TableWrite
from ..read.execute.files import footer_disagreement, not_parquet
from ..storage.base import Storage
from ..storage.footer import StoredFile
from .findings import Finding


def write_findings(
    storage: Storage,
    record: Revision,
    table: str,
    checked: MutableMapping[str, StoredFile],
) -> list[Finding]:
    """What is wrong with the files ``record`` references for ``table``: missing, not
    Parquet, not the file its commit recorded (where the entry records the files' stats:
    one finding per file, saying what differs), or together holding another number of rows
    than it records. ``checked`` caches each file's state (files are immutable)."""
    write = record.tables[table]
    recorded = dict(zip(write.files, write.file_stats or (), strict=False))
    states = []
    for path in write.files:
        if path not in checked:
            checked[path] = read_footer(storage, path, recorded.get(path))
        states.append(checked[path])
    rewritten = {
        s.path: difference
        for s in states
        if s.problem is None
        and s.path in recorded
        and (difference := stats_difference(recorded[s.path], s)) is not None
    }
    what = f"{record.kind} {record.name!r} (sequence {record.sequence}), table {table!r}"
    if record.kind == COMPACTION:
        return _compaction_findings(record, table, states, rewritten, what)
    findings = []
    for state in states:
        where = f"data file {state.path} of revision {record.name!r} (sequence "
        where += f"{record.sequence}), table {table!r}"
        if state.problem == "missing":
            findings.append(Finding.of("missing_file", state.path, f"{where}, is missing"))
        elif state.problem is not None:
            message = not_parquet(record.name, table, state.path, state.problem)
            findings.append(Finding.of("corrupt_file", state.path, message))
        elif state.path in rewritten:
            message = f"{where}, was rewritten after its commit ({rewritten[state.path]})"
            findings.append(Finding.of("corrupt_file", state.path, message))
    wrong = None if rewritten else _disagreement(write, states)
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
    record: Revision,
    table: str,
    states: list[StoredFile],
    rewritten: Mapping[str, str],
    what: str,
) -> list[Finding]:
    """One finding for a damaged compaction: what is wrong with each of its bad files."""
    problems = [
        f"{s.path} is {s.problem}" if s.problem == "missing" else f"{s.path}: {s.problem}"
        for s in states
        if s.problem is not None
    ]
    problems += [f"{path} was rewritten after its commit ({d})" for path, d in rewritten.items()]
    wrong = None if rewritten else _disagreement(record.tables[table], states)
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
