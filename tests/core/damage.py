"""A tiny committed dataset to damage, and snapshots that prove nothing changed afterwards."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

from harness.dates import day

from revisions_assets import RevisionedDataset
from revisions_assets.core.log.revision_log import entry_path

from .helpers import frame

TABLE = "t"
SCHEMA = "id long, v string"


def build_template(spark, root: str) -> None:
    """Three revisions of table ``t``: a major r1 (ids 1-3), minors r2 (id 2) and r3 (id 4)."""
    ds = RevisionedDataset(root, spark=spark, id_columns=["id"])
    for name, rows, when, major in (
        ("r1", [(1, "a"), (2, "b"), (3, "c")], 0, True),
        ("r2", [(2, "B")], 1, False),
        ("r3", [(4, "d")], 2, False),
    ):
        ds.commit(
            {TABLE: frame(spark, rows, SCHEMA)},
            timestamp=day(when),
            is_major=major,
            version="v1",
            name=name,
        )


def copy_dataset(template: str | Path, target: Path) -> Path:
    shutil.copytree(template, target, symlinks=True)
    return target


def snapshot(top: Path) -> dict[str, object]:
    """Every entry below ``top``: a file hash, a link target, or a folder (links not followed)."""
    out: dict[str, object] = {}
    for dirpath, dirs, files in os.walk(top):
        for name in dirs + files:
            path = Path(dirpath) / name
            rel = path.relative_to(top).as_posix()
            if path.is_symlink():
                out[rel] = ("link", os.readlink(path))
            elif path.is_dir():
                out[rel] = "dir"
            else:
                out[rel] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


def data_files(root: Path, revision: str) -> list[Path]:
    return sorted((root / revision / TABLE).glob("part-*.parquet"))


def entry(root: Path, sequence: int) -> dict:
    return json.loads((root / entry_path(sequence)).read_text())


def as_earlier_release(root: Path) -> None:
    """Rewrite every log entry as the previous release wrote it (format 2): without the
    statistics of its files and the digest of the entry before. Reads check the files of
    such an entry by the rows of each write only: their footers cannot tell a file
    rewritten with the same rows, and only the row hashes (``verify --deep``) can."""
    for path in sorted((root / "_log").glob("*.json")):
        doc = json.loads(path.read_text())
        doc["format"] = 2
        doc.pop("previous_sha256", None)
        writes = [*doc.get("tables", {}).values()]
        for swaps in (doc.get("purge") or {}).get("swaps", {}).values():
            writes += [swap["write"] for swap in swaps if swap.get("write")]
        for write in writes:
            write.pop("file_stats", None)
        path.unlink()  # a commit links its entry: never write through to another copy
        path.write_text(json.dumps(doc))


def write_entry(root: Path, sequence: int, content: object) -> None:
    """Replace log entry ``sequence`` by ``content`` (bytes as is, anything else as JSON)."""
    path = root / entry_path(sequence)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.unlink(missing_ok=True)
    path.write_bytes(content if isinstance(content, bytes) else json.dumps(content).encode())
