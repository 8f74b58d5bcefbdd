"""The revision IO manager: every materialization is one revision of a revisioned dataset.

``handle_output`` only dispatches a ``RevisionWrite`` (the slice the asset body
resolved, its DataFrame, the consumer positions) to the engine's commit and
publishes what was committed as output metadata. ``load_input`` gives
downstream assets the state of a table (as of the input partition's end when
partitioned), or, for inputs marked ``revisions/read=changes``, the changes
since the consumer's own recorded position, pinned to the upstream head.
"""

import json
from typing import Any

import dagster as dg
from pydantic import Field
from pyspark.sql import DataFrame

from revisions_assets import RevisionedDataset
from revisions_assets.core.errors import RevisionsError
from revisions_assets.core.records import Revision

from .location import DatasetLocation
from .slice import TableAddress, UpstreamNotReadyError
from .spark import SparkSessionResource
from .values import (
    META_CONSUMER,
    META_READ,
    RevisionWrite,
    UpstreamChanges,
    open_dataset,
)


class UnexpectedOutputError(RevisionsError, TypeError):
    """An asset handed the revision IO manager something other than a RevisionWrite."""


def revision_metadata(rev: Revision, write: RevisionWrite) -> dict[str, Any]:
    """The metadata a materialization shows in the UI."""
    s = write.slice
    t = rev.tables[s.table]
    meta: dict[str, Any] = {
        "revision": rev.name,
        "kind": "major" if rev.is_major else "minor",
        "why": s.reason,
        "sequence": rev.sequence,
        "version": t.version or "",
        "timestamp": rev.timestamp.isoformat(),
        "rows": t.rows,
        "tombstones": t.tombstones,
        "files": len(t.files),
        "bytes": t.bytes,
        "dagster/row_count": t.rows - t.tombstones,
        "dataset_root": dg.MetadataValue.path(s.root),
        "table": s.table,
        "upstream_positions": dg.MetadataValue.json(
            [
                {
                    "dataset": p.dataset,
                    "table": p.table,
                    "from": write.expected_positions.get((p.dataset, p.table)),
                    "to": p.sequence,
                }
                for p in rev.upstream
            ]
        ),
    }
    if not write.upstream:  # a consumer's work is given by its positions, not by a window
        meta["compute_window"] = (
            f"{s.compute_start.isoformat()} .. {s.compute_end.isoformat()}"
            if s.compute_start and s.compute_end
            else "full snapshot"
        )
    return meta


class RevisionsIOManager(dg.ConfigurableIOManager):
    """Writes each materialization as a revision; loads inputs as Spark DataFrames."""

    location: dg.ResourceDependency[DatasetLocation] = Field(
        description="Where the datasets live (DatasetLocation)."
    )
    spark: dg.ResourceDependency[SparkSessionResource] = Field(
        description="The Spark session resource used for reads and writes."
    )

    def handle_output(self, context: dg.OutputContext, obj: RevisionWrite) -> None:
        if not isinstance(obj, RevisionWrite):
            raise UnexpectedOutputError(
                f"asset {context.asset_key.to_user_string()} returned {type(obj).__name__}; the "
                "revision IO manager stores RevisionWrite values (declare the asset with "
                "featurized_asset, scoring_asset or reference_asset)"
            )
        s = obj.slice
        ds = open_dataset(self.spark.spark_session, s.root, s.table, s.id_columns)
        rev = ds.commit(
            {s.table: obj.data},
            timestamp=s.timestamp,
            is_major=s.is_major,
            version=s.code_version,
            producer={
                "asset_key": s.asset_key,
                "run_id": context.run_id,
                "partition_key": s.partition or "",
            },
            upstream=obj.upstream,
            expected_positions=obj.expected_positions,
            properties={"reason": s.reason},
        )
        if rev is None:
            context.add_output_metadata(
                {
                    "revision": "none: no rows, nothing committed",
                    "kind": "none",
                    "why": s.reason,
                    "dataset_root": dg.MetadataValue.path(s.root),
                    "table": s.table,
                }
            )
            context.log.info(f"{s.asset_key}: no rows to write, no revision committed")
            return
        context.add_output_metadata(revision_metadata(rev, obj))
        context.log.info(
            f"{s.asset_key}: committed {'major' if rev.is_major else 'minor'} revision "
            f"{rev.name} (sequence {rev.sequence}) to {s.root}/{s.table}: {s.reason}"
        )

    def load_input(self, context: dg.InputContext) -> DataFrame | UpstreamChanges:
        up = context.upstream_output
        assert up is not None and up.asset_key is not None
        address = TableAddress.from_metadata(up.definition_metadata, up.asset_key.to_user_string())
        root = self.location.root_for(address.dataset)
        spark = self.spark.spark_session
        upstream = open_dataset(spark, root, address.table, address.id_columns)
        if upstream.head_sequence == 0:
            raise UpstreamNotReadyError(
                f"input {up.asset_key.to_user_string()} ({root}, table {address.table!r}) has no "
                "revision yet: materialize it first"
            )
        mode = str(context.definition_metadata.get(META_READ, "state"))
        if mode == "changes":
            return self._load_changes(context, upstream, root, address, up.asset_key)
        if context.has_asset_partitions:
            return upstream.read(address.table, as_of=context.asset_partitions_time_window.end)
        return upstream.read(address.table)

    def _load_changes(
        self,
        context: dg.InputContext,
        upstream: RevisionedDataset,
        root: str,
        address: TableAddress,
        key: dg.AssetKey,
    ) -> UpstreamChanges:
        consumer = json.loads(str(context.definition_metadata[META_CONSUMER]))
        own = RevisionedDataset(
            self.location.root_for(consumer["dataset"]), spark=self.spark.spark_session
        )
        since = own.upstream_position(upstream.root, address.table, consumer["table"])
        head = upstream.head_sequence
        changes = upstream.changes(address.table, since_sequence=since, until_sequence=head)
        context.log.info(
            f"{key.to_user_string()}: changes since sequence {since} up to {head}"
            f"{' (reset)' if changes.is_reset else ''}"
        )
        return UpstreamChanges(
            upstream,
            upstream.root,
            address.table,
            address.id_columns,
            key.to_user_string(),
            changes,
        )
