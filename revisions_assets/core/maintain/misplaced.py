"""Data files found away from where the log says they are: a revision or compaction folder
renamed (``mv X X.moved``), some of its files moved, or a table folder moved into another
folder (``mv X/t Y/``). No Spark, no data read: the listing and Parquet footers.

A file a live entry misses (``X/t/part-0.parquet``) is looked for among the files no entry
references by its name below its revision folder (``t/part-0.parquet``), at any depth: the
folder above that name is the *holder* (``X.moved``, ``Y``, ``backup/X``). A file the holder
has must then be the one the entry misses: where the entry recorded its files' stats, file
by file, its size, its footer's rows and its footer's digest (``stats_difference``, as the
file gate of reads compares them); for entries written before, the files one holder has
for one entry's table, with the table's files still in place, must add up to the bytes and
rows the log records for the table: exactly when the holder has every missing file, at most
when it has only some. Verify reports each holder (``misplaced_folder``, an error) with the
exact ``mv`` that puts the files back; vacuum never deletes a holder nor a matched file.
"""

from __future__ import annotations

import posixpath
import shlex
from collections.abc import Callable, Collection, Iterable, Mapping, MutableMapping, Sequence
from dataclasses import dataclass

from ..log.file_stats import stats_difference
from ..log.layout import LOG_DIR, holds_log, is_temp_name
from ..log.records import COMPACTION, Revision, TableWrite
from ..storage.base import FileInfo, Storage
from ..storage.footer import StoredFile, stored_file
from .findings import Finding

#: the smallest Parquet file: two magics, a footer length (a file that is missing weighs more)
_SMALLEST_PARQUET = 12


@dataclass(frozen=True)
class Misplaced:
    """Data files that live entries miss below ``target`` (their folder), found below
    ``holder``: ``moves`` is each (where it is, where the log says it is)."""

    holder: str
    target: str
    entries: tuple[Revision, ...]
    moves: tuple[tuple[str, str], ...]
    missing: int  # the files these entries miss below ``target`` in all
    #: matched file by file, by the stats the entries recorded (else by each table's totals)
    by_file: bool = False

    @property
    def folder(self) -> str:
        """The top folder that holds them: what vacuum must keep."""
        return self.holder.split("/", 1)[0]

    @property
    def complete(self) -> bool:
        return len(self.moves) == self.missing

    def finding(self, storage: Storage, listed: Collection[str]) -> Finding:
        """The error verify reports, its fix the commands that move the files back."""
        what = " and ".join(
            f"{'compaction' if r.kind == COMPACTION else 'revision'} {r.name!r} "
            f"(sequence {r.sequence})"
            for r in self.entries
        )
        files = "data file" if self.missing == 1 else f"{self.missing} data files"
        count = f"the {files}" if self.complete else f"{len(self.moves)} of the {files}"
        example = self.moves[0][1].split("/", 1)[1]
        message = (
            f"folder {self.holder!r} holds {count} that {what} "
            f"{'misses' if len(self.entries) == 1 else 'miss'} in folder "
            f"{self.target!r} (the same names below it, such as {example}, sizes and "
            f"{'footers' if self.by_file else 'row counts'} as the log records): it was moved "
            "or renamed; reads that include them fail until they are back"
        )
        commands = " && ".join(move_commands(storage, self, listed))
        fix = (
            f"put them back with `{commands}`, then run `revisions verify` again (vacuum never "
            "deletes this folder, and deletes no orphan folder while verify reports an error)"
        )
        return Finding.of("misplaced_folder", self.holder, message, fix=fix)


def find_misplaced(
    storage: Storage,
    records: Sequence[Revision],
    removed: Collection[int],
    files: Sequence[FileInfo],
    footers: MutableMapping[str, StoredFile],
    known: Collection[str] = (),
) -> list[Misplaced]:
    """The files the entries of ``records`` not in ``removed`` miss, found among ``files``
    (the root's listing) where no entry and no path of ``known`` (files purges swapped out)
    references them, grouped by holder. ``footers`` caches footers read (files are
    immutable); nothing is read when no file is missing."""
    listed = {f.path: f for f in files}
    live = [r for r in records if r.sequence not in removed]
    gaps = [
        (r, table, [p for p in write.files if p not in listed])
        for r in live
        for table, write in r.tables.items()
    ]
    gaps = [(r, table, gone) for r, table, gone in gaps if gone]
    if not gaps:
        return []
    index = _unreferenced(records, files, known)

    def footer(path: str) -> StoredFile:
        if path not in footers:
            footers[path] = stored_file(storage, path)
        return footers[path]

    entries: dict[tuple[str, str], dict[int, Revision]] = {}  # by (holder, target folder)
    moves: dict[tuple[str, str], dict[str, str]] = {}
    missing: dict[tuple[int, str], int] = {}  # (sequence, target folder) -> files missed
    by_totals: set[tuple[str, str]] = set()  # holders matched by a table's totals
    for record, table, gone in gaps:
        write = record.tables[table]
        for path in gone:
            key = (record.sequence, path.split("/", 1)[0])
            missing[key] = missing.get(key, 0) + 1
        by_holder: dict[str, list[tuple[str, str]]] = {}
        for path in gone:
            if "/" not in path:
                continue
            rest = path.split("/", 1)[1]
            for candidate in index.get(rest, ()):
                by_holder.setdefault(candidate[: -len(rest) - 1], []).append((candidate, path))
        recorded = {s.path: s for s in write.file_stats or ()}
        for holder, pairs in by_holder.items():
            if not recorded:
                pairs = _fit_totals(write, gone, pairs, listed, footer)
            else:  # file by file
                pairs = [
                    (c, p)
                    for c, p in pairs
                    if listed[c].size == recorded[p].bytes  # a footer read only then
                    and footer(c).problem is None
                    and stats_difference(recorded[p], footer(c)) is None
                ]
            for candidate, path in pairs:
                key = (holder, path.split("/", 1)[0])
                entries.setdefault(key, {})[record.sequence] = record
                moves.setdefault(key, {})[candidate] = path
                if not recorded:
                    by_totals.add(key)
    return [
        Misplaced(
            holder=holder,
            target=target,
            entries=tuple(entries[holder, target][s] for s in sorted(entries[holder, target])),
            moves=tuple(sorted(moves[holder, target].items())),
            missing=sum(missing[s, target] for s in entries[holder, target]),
            by_file=(holder, target) not in by_totals,
        )
        for holder, target in sorted(entries)
    ]


def _fit_totals(
    write: TableWrite,
    gone: Sequence[str],
    pairs: list[tuple[str, str]],
    listed: Mapping[str, FileInfo],
    footer: Callable[[str], StoredFile],
) -> list[tuple[str, str]]:
    """The (candidate, missing file) ``pairs`` of one holder for a write that recorded no
    stats of its files (an entry written before), when their sizes and footer rows, with
    the write's files still in place, add up to what the log records for the table: exactly
    when the holder has every missing file, at most when it has only some; else none."""
    present = [p for p in write.files if p in listed]
    present_rows = [footer(p).rows for p in present]
    rows = None if None in present_rows else sum(r or 0 for r in present_rows)
    size = sum(listed[p].size for p in present)
    pairs = [(c, p) for c, p in pairs if footer(c).rows is not None]
    if not pairs:
        return []
    held = size + sum(listed[c].size for c, _ in pairs)
    held_rows = None if rows is None else rows + sum(footer(c).rows or 0 for c, _ in pairs)
    left = len(gone) - len(pairs)
    if left == 0:
        fits = held == write.bytes and held_rows in (None, write.rows)
    else:
        fits = held + left * _SMALLEST_PARQUET <= write.bytes and (
            held_rows is None or held_rows <= write.rows
        )
    return pairs if fits else []


def _unreferenced(
    records: Iterable[Revision], files: Iterable[FileInfo], known: Collection[str]
) -> dict[str, list[str]]:
    """The data files no entry references, by each of their trailing names of two parts or
    more (``t/part-0.parquet`` of ``X.moved/t/part-0.parquet``)."""
    referenced = {f for r in records for write in r.tables.values() for f in write.files}
    paths = [f.path for f in files]
    nested = {p.split("/", 1)[0] for p in paths if holds_log(p.split("/", 1)[0], [p])}
    index: dict[str, list[str]] = {}
    for path in paths:
        parts = path.split("/")
        if (
            len(parts) < 3  # a holder, then at least <table>/<file>
            or parts[0] == LOG_DIR
            or parts[0] in nested
            or not parts[-1].endswith(".parquet")
            or is_temp_name(parts[-1])
            or path in referenced
            or path in known
        ):
            continue
        for start in range(1, len(parts) - 1):
            index.setdefault("/".join(parts[start:]), []).append(path)
    return index


def move_commands(storage: Storage, misplaced: Misplaced, listed: Collection[str]) -> list[str]:
    """The shell commands that put ``misplaced`` back: the holder renamed when it holds the
    whole folder, else each table folder moved, else each file."""
    moves = dict(misplaced.moves)
    holder, target = misplaced.holder, misplaced.target
    if (
        "/" not in holder
        and not storage.exists(target)
        and _data_below(listed, holder) == set(moves)
    ):
        return [_move(storage, holder, target, folder=True)]
    commands = []
    by_folder: dict[str, list[str]] = {}
    for source in moves:
        by_folder.setdefault(posixpath.dirname(source), []).append(source)
    for source_folder, sources in sorted(by_folder.items()):
        target_folder = posixpath.dirname(moves[sources[0]])
        whole = _data_below(listed, source_folder) == set(sources)
        if whole and not storage.exists(target_folder):
            parent = posixpath.dirname(target_folder)
            if parent and not storage.exists(parent) and not _is_s3(storage):
                commands.append(f"mkdir -p {shlex.quote(_where(storage, parent))}")
            commands.append(_move(storage, source_folder, target_folder, folder=True))
        else:
            commands += [_move(storage, s, moves[s], folder=False) for s in sorted(sources)]
    return commands


def _data_below(listed: Collection[str], folder: str) -> set[str]:
    prefix = f"{folder}/"
    return {p for p in listed if p.startswith(prefix) and p.endswith(".parquet")}


def _is_s3(storage: Storage) -> bool:
    return storage.uri.startswith("s3://")


def _where(storage: Storage, rel: str) -> str:
    return f"{storage.uri.rstrip('/')}/{rel}"


def _move(storage: Storage, source: str, target: str, *, folder: bool) -> str:
    """``mv`` locally, ``aws s3 mv`` on S3 (``--recursive`` for a folder)."""
    if _is_s3(storage):
        slash = "/" if folder else ""
        recursive = "--recursive " if folder else ""
        return (
            f"aws s3 mv {recursive}{shlex.quote(_where(storage, source) + slash)} "
            f"{shlex.quote(_where(storage, target) + slash)}"
        )
    return f"mv {shlex.quote(_where(storage, source))} {shlex.quote(_where(storage, target))}"


__all__ = ["Misplaced", "find_misplaced", "move_commands"]
