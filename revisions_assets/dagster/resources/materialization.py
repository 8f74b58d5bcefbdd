"""What a run's commit shows in the catalog: its MaterializeResult, read from the log.

The same for a commit made in process and one a remote job made (``pipes.py``): the
revision as metadata (``metadata.py``: the revision's entries, the slice's, Dagster's table
conventions) and as the data version (``<table>@<sequence>``), every other partition the
revision covers reported in the same run with the revision's code version, data version and
metadata (``covered_materializations``: a major launched for one partition covers them all),
so the catalog agrees with the log.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import dagster as dg

from revisions_assets.core.read.scan import DatasetSnapshot
from revisions_assets.core.runs.commit import CommittedRun
from revisions_assets.core.runs.run_slice import RunSlice

from .address import column_descriptions
from .metadata import (
    compaction_metadata,
    coverage_entries,
    covered_materializations,
    data_version,
    revision_metadata,
    slice_metadata,
    table_metadata,
)
from .resolver import time_partitions


def materialize_result(
    context: dg.AssetExecutionContext,
    s: RunSlice,
    done: CommittedRun,
    snapshot: DatasetSnapshot,
    metadata: Mapping[str, Any] | None = None,
) -> dg.MaterializeResult:
    """The MaterializeResult of the run's commit ``done``, read from ``snapshot`` (the run's
    snapshot of its log after the commit); ``metadata``: more entries (the body's own). The
    other partitions the revision covers are logged as materializations of the same run."""
    descriptions = column_descriptions(context.assets_def.metadata_by_key[context.asset_key])
    if done.compaction is not None:
        written = done.compaction.tables[s.table]
        context.log.info(
            f"{s.asset_key}: compacted {s.root}/{s.table} as {done.compaction.name} "
            f"(sequence {done.compaction.sequence}): {written.rows} rows in "
            f"{len(written.files)} files"
        )
    tables = snapshot.tables()
    schema = tables[s.table].schema if s.table in tables else None
    shown = {
        **compaction_metadata(s.table, done.compaction),
        **slice_metadata(s),
        **(metadata or {}),
    }
    rev = done.revision
    if rev is None:
        history = [r for r in snapshot.revisions() if r.wrote(s.table)]
        head = history[-1].sequence if history else None
        context.log.info(f"{s.asset_key}: no rows to write, no revision committed")
        return dg.MaterializeResult(
            metadata={
                "revision": "none: no rows, nothing committed",
                "kind": "none",
                **shown,
                **table_metadata(s, schema, None, descriptions),
            },
            # a run that committed nothing keeps the table's data version
            data_version=dg.DataVersion(data_version(s.table, head)) if head else None,
        )
    context.log.info(
        f"{s.asset_key}: committed {'major' if rev.is_major else 'minor'} revision "
        f"{rev.name} (sequence {rev.sequence}) to {s.root}/{s.table}: {s.reason}"
    )
    pdef = time_partitions(context.assets_def.partitions_def)
    entries = {
        **revision_metadata(s, rev),
        **shown,
        **(coverage_entries(s, rev, pdef) if pdef is not None else {}),
        **table_metadata(s, schema, done.entities, descriptions),
    }
    if pdef is not None:
        for event in covered_materializations(context, s, rev, pdef, entries):
            context.log_event(event)
    return dg.MaterializeResult(
        metadata=entries, data_version=dg.DataVersion(data_version(s.table, rev.sequence))
    )
