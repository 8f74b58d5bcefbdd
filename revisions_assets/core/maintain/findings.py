"""The findings of ``verify`` (and of the checks vacuum makes before it deletes): each
kind, how serious it is and how an operator repairs it.

``error``: reads or commits fail or are refused until it is repaired; ``warning``:
harmless to reads and commits (leftovers that vacuum reclaims, a stale derived file that
the next commit rewrites). The docs' recovery guide repeats every kind.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Severity = Literal["error", "warning"]

#: every kind of finding, its severity and how an operator fixes it (the docs' recovery
#: guide repeats these)
KINDS: dict[str, tuple[Severity, str]] = {
    "log_gap": (
        "error",
        "restore the missing entry from a backup (entries are immutable files); if it is lost "
        "for good, move the entries after the gap out of _log/ (their revisions are dropped "
        "and their folders become orphans) and delete description.parquet (it lists them), "
        "so that the log ends before the gap",
    ),
    "log_entry_corrupt": (
        "error",
        "restore the entry from a backup; a stray file that is not an entry can be deleted; "
        "if the last entry is damaged beyond repair, move it out of _log/ (its revision is "
        "dropped) and delete description.parquet (it lists it)",
    ),
    "log_chain_broken": (
        "error",
        "an entry was rewritten after its commit (each entry records the digest of the one "
        "before it): restore the entries named from a backup (entries are immutable files); "
        "until then commits, compactions, purges and vacuums are refused",
    ),
    "log_entry_rewritten": (
        "error",
        "the entry file differs from its copy in the checkpoint that covers it (opens read "
        "the checkpoint's): restore the entry from a backup (entries are immutable files)",
    ),
    "checkpoint_invalid": (
        "error",
        "a record of the checkpoint fails the checks of log entries (a forged or damaged "
        "checkpoint; opens read the entry files instead): when every entry file it covers is "
        "present, delete the checkpoint and _log/_last_checkpoint (a later commit writes a "
        "new one); otherwise restore it from a backup",
    ),
    "log_missing": (
        "error",
        "restore _log/ from a backup; if no revision was ever committed here, delete the "
        "revision folders and description.parquet",
    ),
    "log_head_lost": (
        "error",
        "put the entry back: restore it from a backup (entries are immutable files). Until "
        "then nothing is committed to this dataset (a commit would take the lost sequence) "
        "and vacuum keeps its folder. Without a backup it cannot be rebuilt (see 'Recovering "
        "a damaged dataset'): re-commit its data, then delete description.parquet so that "
        "the log's end is accepted",
    ),
    "upstream_head_lost": (
        "error",
        "the upstream lost log entries this dataset consumed: repair the upstream first "
        "(`revisions verify UPSTREAM`, log_head_lost); until then this dataset's next run "
        "would skip what the upstream commits at those sequences",
    ),
    "folder_of_damaged_entry": (
        "warning",
        "keep it: it may hold the data of a missing or damaged log entry; repair the log "
        "first (log_gap, log_entry_corrupt, log_head_lost), after which it is either "
        "referenced again or an orphan",
    ),
    "compaction_damaged": (
        "error",
        "rebuild it from the revisions it holds: `revisions compact ROOT --rebuild NAME` "
        "(ds.maintenance.compact(rebuild=NAME)), or restore its files from a backup; vacuum "
        "keeps the revisions it holds until then",
    ),
    "compaction_replaced": (
        "warning",
        "harmless: a rebuilt compaction holds the same state and reads use it; a vacuum "
        "past the retention horizon removes this one",
    ),
    "missing_file": (
        "error",
        "when a misplaced_folder finding says where it is, move it back as its fix says; else "
        "restore the file from a backup; otherwise reads that include its revision raise "
        "MissingFileError: commit a new major of the table so that default reads no longer "
        "need it",
    ),
    "misplaced_folder": (
        "error",
        "move the files back where the log says they are: the finding's fix gives the exact "
        "commands (the folder renamed back, or each table folder or file moved), then run "
        "`revisions verify` again; vacuum never deletes this folder, and deletes no orphan "
        "folder while verify reports an error",
    ),
    "corrupt_file": (
        "error",
        "the file was replaced or truncated outside revisions-assets: restore it from a "
        "backup; otherwise reads that include its revision raise CorruptFileError: commit a "
        "new major of the table so that default reads no longer need it",
    ),
    "path_escape": (
        "error",
        "replace the symbolic link by the real folder or file inside the root, or remove it: "
        "revisions-assets never follows links out of a dataset",
    ),
    "pattern_path": (
        "error",
        "the log names a data file whose path holds a pattern character (*?[]{} or a "
        "backslash), which revisions-assets never writes: the entry was written or changed by "
        "hand. Restore the entry from a backup; never read its files with a tool that expands "
        "patterns (Spark, Hadoop and Polars do by default): they may read files outside the root",
    ),
    "description_stale": (
        "warning",
        "harmless (the engine never reads description.parquet): the next commit, or the next "
        "open with write access, rewrites it",
    ),
    "checkpoint_unreadable": (
        "warning",
        "harmless but opens read more entries: delete the damaged checkpoint and "
        "_log/_last_checkpoint; a later commit writes a new checkpoint",
    ),
    "orphan_folder": (
        "warning",
        "a writer failed or was killed before its commit (or is committing right now): nothing "
        "reads it; vacuum reclaims it after its grace period (while verify reports no error), "
        "or delete it once no writer runs",
    ),
    "deep_checks_skipped": (
        "warning",
        "repair the errors listed (each has its fix), then run `revisions verify --deep` "
        "(ds.maintenance.verify(deep=True)) again",
    ),
    "null_id": (
        "error",
        "the revision holds rows with a null id, which no read can merge: commit a new major "
        "of the table without them (or purge the entity) and vacuum the old revisions",
    ),
    "duplicate_id": (
        "error",
        "the revision holds an id twice, so reads return an arbitrary one of its rows: "
        "commit a new major of the table with one row per id and vacuum the old revisions",
    ),
    "row_count_mismatch": (
        "error",
        "the revision's files hold another number of rows (or tombstones) than its log entry "
        "records: a file was replaced or truncated outside revisions-assets; restore it from "
        "a backup, or commit a new major of the table (vacuum keeps what it stands for "
        "until then)",
    ),
    "row_hash_mismatch": (
        "error",
        "the file holds other values than were committed (same rows, other bytes: changed "
        "outside revisions-assets): restore it from a backup; reads return the changed values "
        "until then, and compact and purge refuse to rewrite it; without a backup, commit a "
        "new major of the table",
    ),
    "temp_file": (
        "warning",
        "a writer failed or died between writing a temporary file and renaming it: nothing "
        "reads it; vacuum reclaims it, or delete it",
    ),
    "nested_dataset": (
        "warning",
        "a dataset of its own (it has a _log/) lies inside this dataset's root: nothing of "
        "this dataset reads or removes it; move it out of the root",
    ),
    "state_removed": (
        "error",
        "the rows of those revisions are gone: recompute the table and commit it as a "
        "complete major (a skip_unchanged major is written complete here; carry=True is "
        "refused), so that default reads no longer need them",
    ),
    "carried_state_incomplete": (
        "error",
        "the entities only the missing revisions hold are absent from every read of the "
        "major's state: recompute the table and commit it as a complete major (not "
        "carry=True), then check what consumers read from it",
    ),
    "compaction_partial": (
        "warning",
        "harmless: reads use it for what it holds and read the carried revisions from their "
        "own files; compact the table to write a complete compaction, and a vacuum past "
        "the retention horizon removes this one",
    ),
    "compaction_missed_purge": (
        "error",
        "an earlier release committed this compaction although a purge landed while it was "
        "written: reads no longer use it, but its files may still hold the erased rows. Run "
        "the purge again with the same ids (`revisions purge`: it rewrites this "
        "compaction's files too), then `revisions vacuum ROOT --retain 0 --force` deletes the old "
        "files at once (any vacuum past the purge deletes them; the finding goes once a "
        "vacuum removes the compaction); `revisions compact` writes a compaction reads "
        "use. If a vacuum also removed the revisions it holds (state_removed), commit a "
        "new major of the table",
    ),
    "purge_lost_rows": (
        "error",
        "reads after the purge lack rows of entities it was not asked to remove, or differ "
        "from the rows before it: do not vacuum (the files the purge swapped out still hold "
        "the state before it); report it, then commit the state before the purge, without "
        "the purged entities, as a complete major",
    ),
}


@dataclass(frozen=True)
class Finding:
    """One problem of a dataset's storage."""

    kind: str  # a key of KINDS
    severity: Severity
    path: str  # relative to the dataset root; "" for the root itself
    message: str
    fix: str

    @classmethod
    def of(
        cls,
        kind: str,
        path: str,
        message: str,
        severity: Severity | None = None,
        fix: str | None = None,
    ) -> Finding:
        """A finding of ``kind``, with its severity and fix (``fix``: this one's own, such
        as the exact commands that repair it)."""
        default, generic = KINDS[kind]
        return cls(kind, severity or default, path, message, fix or generic)


__all__ = ["KINDS", "Finding", "Severity"]
