"""The loader: what the revision IO manager hands an asset for each of its inputs.

A scoring asset gets, per revisioned input, the changes since the position its slice
recorded, pinned to the slice's head (``UpstreamChanges``); nothing when its run has
nothing to consume or was refused (its body then materializes nothing). Any other consumer
gets the state of the table as of the end of its input partitions (or the latest state).
Every read is a scan of the run's snapshot of the input's log.
"""

from __future__ import annotations

from typing import Any, Protocol

import dagster as dg
from pyspark.sql import DataFrame, SparkSession

from revisions_assets.core.read.scan import DatasetSnapshot
from revisions_assets.core.runs.consume import changes_since
from revisions_assets.core.runs.run_slice import RunSlice

from .address import TableAddress, upstream_refs
from .resolver import step_asset_key, time_partitions
from .slice import ScoringRangeError, UpstreamNotReadyError, compute_window
from .values import UpstreamChanges


class RunReads(Protocol):
    """What the loader reads through (the revision IO manager)."""

    def slice_for(self, context: Any) -> RunSlice: ...

    def snapshot(self, run_id: str, dataset: str) -> DatasetSnapshot: ...

    def session(self) -> SparkSession: ...


def load_input(io: RunReads, context: dg.InputContext) -> DataFrame | UpstreamChanges | None:
    """The input ``context`` names: a scoring input's changes, else a table's state."""
    if _consumes_changes(context):
        try:
            consumer = io.slice_for(context)
        except ScoringRangeError:
            return None  # the body refuses the run: nothing is read
        return _changes(io, context, consumer)
    return _state(io, context)


def _consumes_changes(context: dg.InputContext) -> bool:
    """Whether the consuming asset reads this input as changes (a scoring asset's input)."""
    key = step_asset_key(context.step_context)
    if key is None:
        return False
    refs = upstream_refs(context.step_context.assets_def.metadata_by_key[key])
    return any(ref.input_name == context.name for ref in refs)


def _changes(io: RunReads, context: dg.InputContext, consumer: RunSlice) -> UpstreamChanges | None:
    if consumer.skip is not None:
        return None  # the body commits nothing; do not plan a read
    u = consumer.input(context.name)
    io.session()
    snapshot = io.snapshot(consumer.run_id, u.root)
    compared = consumer.uses_columns if u.kind == "main" else None
    changes = changes_since(snapshot, u.table, u.since, u.head, compared)
    context.log.info(
        f"{u.asset_key}: changes since sequence {u.since} up to {u.head}"
        f"{' (reset)' if changes.is_reset else ''}"
    )
    return UpstreamChanges(changes, snapshot, u.table, u.id_columns, u.head, slice=u)


def _state(io: RunReads, context: dg.InputContext) -> DataFrame:
    up = context.upstream_output
    assert up is not None and up.asset_key is not None
    address = TableAddress.from_metadata(up.definition_metadata, up.asset_key.to_user_string())
    snapshot = io.snapshot(context.step_context.run_id, address.dataset)
    if not any(r.wrote(address.table) for r in snapshot.revisions()):
        raise UpstreamNotReadyError(
            f"input {up.asset_key.to_user_string()} ({snapshot.root}, table "
            f"{address.table!r}) has no revision yet: materialize it first"
        )
    io.session()
    pdef = time_partitions(context.asset_partitions_def) if context.has_asset_partitions else None
    end = compute_window(pdef, context.asset_partition_key_range, False)[1] if pdef else None
    return snapshot.scan(address.table, as_of=end).to_spark()
