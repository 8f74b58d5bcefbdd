"""The revision IO manager: every materialization is one revision of a revisioned dataset.

It is the one resolver, as Dagster's ``DbIOManager`` is: ``slice_for`` turns the
run's context (asset key, partition range, run tags, config, code version) and
the dataset logs into one frozen ``DatasetSlice``, once per run and asset, and
``load_input``, the asset body and ``materialize`` all read that same object:

- ``load_input`` gives a scoring asset, per input, the changes since the position
  its slice recorded, pinned to the slice's head; any other consumer gets the
  state of the table as of the end of its input partitions (or the latest state);
- the asset body asks ``slice_for`` for its window, major or minor;
- ``materialize``, called by the asset body with the DataFrame it computed, commits it
  with the slice's timestamp, version, positions and precondition, and returns the
  body's MaterializeResult: the revision as metadata (Dagster's table conventions
  included) and as the data version (``handle_output`` only refuses outputs). It
  commits with ``skip_unchanged``: a minor writes only the rows whose values
  changed, and a major is written as a carrying major where it can be (its rows
  are the complete new state, only the changed ones and tombstones are written);
  a scoring asset's soft major is committed with ``carry=True`` instead (its rows
  are the re-scored entities and tombstones, written as they are; every other
  score is kept).
"""

from collections.abc import Mapping
from datetime import timedelta
from typing import Any

import dagster as dg
from pydantic import Field, PrivateAttr
from pyspark.sql import DataFrame

from revisions_assets.core.errors import ArgumentTypeError, RevisionsError
from revisions_assets.core.log.records import Revision
from revisions_assets.core.log.view import LogView
from revisions_assets.core.read.execute.spark_scan import spark_schema
from revisions_assets.core.read.plan.scans import current_schema
from revisions_assets.core.runs.commit import CommittedRun, commit_run
from revisions_assets.core.runs.consume import changes_since
from revisions_assets.core.runs.run_slice import RunSlice
from revisions_assets.core.runs.versions import decide_major
from revisions_assets.core.timeutil import now_utc
from revisions_assets.core.uris import describe

from .address import (
    NotRevisionedAssetError,
    TableAddress,
    column_descriptions,
    field_versions,
    role_of,
    runs_remotely,
    upstream_refs,
    uses_columns,
)
from .location import DatasetLocation
from .metadata import (
    COLUMN_SCHEMA,
    compaction_metadata,
    data_version,
    revision_metadata,
    slice_metadata,
    table_metadata,
    table_schema,
)
from .slice import (
    PIN_BY_PARTITIONS,
    TAG_FORCE_COMPACTION,
    TAG_FORCE_MAJOR,
    TAG_UPSTREAM_HEADS,
    DatasetSlice,
    UpstreamNotReadyError,
    check_requested_partitions,
    compute_window,
    fit_to_partitions,
    parse_upstream_heads,
    plan_consumer,
    truthy,
    upstream_slices,
)
from .spark import SparkSessionResource
from .values import UpstreamChanges

AnyContext = dg.AssetExecutionContext | dg.InputContext | dg.OutputContext


class UnexpectedOutputError(RevisionsError, TypeError):
    """An asset handed the revision IO manager something other than a Spark DataFrame."""


class NothingToConsumeError(RevisionsError):
    """A consumer returned output although its slice says there is nothing to consume."""


def _step(context: AnyContext) -> Any:
    """The step execution context behind any of the three contexts (the framework-author hook
    Dagster documents on ``get_step_execution_context``)."""
    if isinstance(context, dg.AssetExecutionContext):
        return context.get_step_execution_context()
    return context.step_context


def _step_asset_key(step: Any) -> dg.AssetKey | None:
    assets_def = step.assets_def
    keys = list(assets_def.keys) if assets_def is not None else []
    return keys[0] if len(keys) == 1 else None


def _time_partitions(pdef: dg.PartitionsDefinition | None) -> Any:
    return pdef if isinstance(pdef, dg.TimeWindowPartitionsDefinition) else None


class RevisionsIOManager(dg.ConfigurableIOManager):
    """Writes each materialization as a revision; loads inputs as Spark DataFrames."""

    location: dg.ResourceDependency[DatasetLocation] = Field(
        description="Where the datasets live (DatasetLocation)."
    )
    spark: dg.ResourceDependency[SparkSessionResource] = Field(
        description="The Spark session resource used for reads and writes."
    )
    _slices: dict[tuple[str, str], DatasetSlice] = PrivateAttr(default_factory=dict)

    # -- the resolver ----------------------------------------------------------------------

    def slice_for(self, context: AnyContext) -> DatasetSlice:
        """The slice of the asset being materialized in this step, resolved once per run."""
        if not isinstance(context, AnyContext):
            raise ArgumentTypeError(
                "slice_for needs the asset's execution, input or output context, got "
                f"{describe(context)}"
            )
        step = _step(context)
        key = context.asset_key if isinstance(context, dg.OutputContext) else None
        key = key or _step_asset_key(step)
        if key is None:
            raise NotRevisionedAssetError(
                f"step {step.step.key} does not materialize exactly one asset"
            )
        cache_key = (step.run_id, key.to_user_string())
        if cache_key not in self._slices:
            self._slices[cache_key] = self._resolve(step, key)
        return self._slices[cache_key]

    def _resolve(self, step: Any, key: dg.AssetKey) -> DatasetSlice:
        """The run's facts (definition, partitions, tags, config) and the logs -> the slice."""
        assets_def = step.assets_def
        metadata = assets_def.metadata_by_key[key]
        address = TableAddress.from_metadata(metadata, key.to_user_string())
        code_version = assets_def.code_versions_by_key.get(key)
        config = step.op_config if isinstance(step.op_config, dict) else {}
        forced = truthy(step.run_tags.get(TAG_FORCE_MAJOR)) or bool(config.get("force_major"))
        compact = truthy(step.run_tags.get(TAG_FORCE_COMPACTION)) or bool(
            config.get("force_compaction")
        )
        pdef = _time_partitions(assets_def.partitions_def)
        output = assets_def.get_output_name_for_asset_key(key)
        keys = step.asset_partition_key_range_for_output(output) if pdef is not None else None
        if runs_remotely(metadata):  # the logs only: no JVM in this process
            log_of = self._read_log_of
            root, records = log_of(address.dataset)
        else:  # the handle the run commits with (each log is opened once per run)
            log_of = self._log_of
            own = self.location.dataset(
                address.dataset, self.spark.spark_session, {address.table: address.id_columns}
            )
            root, records = own.root, tuple(own.revisions())
        history = [r for r in records if r.wrote(address.table)]
        common: dict[str, Any] = {
            "asset_key": key.to_user_string(),
            "role": role_of(metadata),
            "root": root,
            "table": address.table,
            "id_columns": address.id_columns,
            "code_version": code_version,
            "partitions": keys,
            "force_compaction": compact,
            "head": records[-1].sequence if records else 0,
        }
        refs = upstream_refs(metadata)
        if not refs:
            fields = field_versions(metadata)
            is_major, reason = decide_major(
                history[-1] if history else None, address.table, code_version, forced, fields
            )
            start, end = compute_window(pdef, keys, is_major) if keys is not None else (None, None)
            return DatasetSlice(
                **common,
                is_major=is_major,
                reason=reason,
                timestamp=end or now_utc(),
                compute_start=start,
                compute_end=end,
                field_versions=fields,
            )
        if keys is None:
            raise NotRevisionedAssetError(
                f"{key.to_user_string()}: a scoring asset needs time partitions (scoring_asset)"
            )
        pin_tag = step.run_tags.get(TAG_UPSTREAM_HEADS)
        if pin_tag == PIN_BY_PARTITIONS:
            plan = fit_to_partitions(
                refs,
                history,
                records,
                address.table,
                code_version,
                forced,
                log_of,
                keys,
                pdef,
            )
        else:
            pins = parse_upstream_heads(pin_tag)
            upstream = upstream_slices(refs, records, address.table, log_of, pins)
            plan = plan_consumer(history, address.table, code_version, forced, upstream, pdef)
        if plan.covers is not None:
            check_requested_partitions(key.to_user_string(), plan, keys, history, pdef)
        end = compute_window(pdef, keys, False)[1]
        return DatasetSlice(
            **common,
            is_major=plan.is_major,
            reason=plan.reason,
            # scores never go back in time: newer scores are never shadowed by older ones
            timestamp=max([end, *(r.timestamp for r in history)]),
            compute_start=None,
            compute_end=None,
            upstream=plan.upstream,
            skip=None if plan.covers is not None else plan.reason,
            soft=plan.soft,
            uses_columns=uses_columns(metadata),
        )

    def _log_of(self, dataset: str) -> tuple[str, tuple[Revision, ...]]:
        ds = self.location.dataset(dataset, self.spark.spark_session)
        return ds.root, tuple(ds.revisions())

    def _read_log_of(self, dataset: str) -> tuple[str, tuple[Revision, ...]]:
        """A dataset's root and log, read without Spark (a remote job commits)."""
        return self.location.root_for(dataset), self.location.read_log(dataset)

    def current_state(self, s: DatasetSlice) -> DataFrame:
        """The slice's table as it is now (a reference minor commits only its difference)."""
        return self.location.dataset(s.root, self.spark.spark_session).read(s.table)

    # -- inputs and outputs ----------------------------------------------------------------

    def run_slice(
        self,
        context: dg.AssetExecutionContext,
        *,
        joins: Mapping[str, Mapping[str, str]] | None = None,
        lookback: timedelta = timedelta(0),
    ) -> RunSlice:
        """The run's slice as plain data (``RunSlice``): what ``materialize`` commits with, and
        what an asset whose Spark runs remotely hands its job (``joins``: each reference
        input's ``on``; ``lookback``: how far before the window the job reads its sources)."""
        s = self.slice_for(context)
        declared = context.assets_def.metadata_by_key[context.asset_key].get(COLUMN_SCHEMA)
        pdef = _time_partitions(context.assets_def.partitions_def)
        keys = pdef.get_partition_keys_in_range(s.partitions) if pdef and s.partitions else ()
        return s.to_run(
            context.run.run_id,
            compact_after=self.location.compact_after,
            partition_keys=keys,
            columns=(
                {c.name: c.type for c in table_schema(declared).columns}
                if declared is not None
                else None
            ),
            joins=joins,
            lookback=lookback,
        )

    def materialize(
        self,
        context: dg.AssetExecutionContext,
        obj: DataFrame,
        metadata: Mapping[str, Any] | None = None,
    ) -> dg.MaterializeResult:
        """Commit what the asset body returned as the run's revision (``commit_run``).

        Called by the asset body, not by Dagster: the data version of a materialization
        (``<table>@<sequence>``, known once the revision is committed) can only be given to
        Dagster in the body's MaterializeResult, never from ``handle_output`` (dagster#15584).
        ``metadata``: more entries for the materialization (the body's own)."""
        key = context.asset_key.to_user_string()
        if not isinstance(obj, DataFrame):
            raise UnexpectedOutputError(
                f"asset {key} returned {type(obj).__name__}; the revision IO manager stores "
                "Spark DataFrames"
            )
        s = self.slice_for(context)
        if s.skip is not None:
            raise NothingToConsumeError(
                f"{s.asset_key}: {s.skip}; a consumer with nothing to consume returns no output"
            )
        ds = self.location.dataset(s.root, self.spark.spark_session, {s.table: s.id_columns})
        done = commit_run(ds, self.run_slice(context), obj)
        return self.materialization(context, done, ds.snapshot().view, metadata)

    def materialization(
        self,
        context: dg.AssetExecutionContext,
        done: CommittedRun,
        view: LogView,
        metadata: Mapping[str, Any] | None = None,
    ) -> dg.MaterializeResult:
        """The MaterializeResult of a run's commit, read from the log (``view``, taken after
        it): the revision as metadata (Dagster's table conventions included) and as the data
        version. The same for a commit made in process and one a remote job made."""
        s = self.slice_for(context)
        definition = context.assets_def.metadata_by_key[context.asset_key]
        descriptions = column_descriptions(definition)
        if done.compaction is not None:
            written = done.compaction.tables[s.table]
            context.log.info(
                f"{s.asset_key}: compacted {s.root}/{s.table} as {done.compaction.name} "
                f"(sequence {done.compaction.sequence}): {written.rows} rows in "
                f"{len(written.files)} files"
            )
        schema = spark_schema(current_schema(view, s.table)) if s.table in view.tables() else None
        shown = {
            **compaction_metadata(s.table, done.compaction),
            **slice_metadata(s),
            **(metadata or {}),
        }
        rev = done.revision
        if rev is None:
            history = view.table_revisions(s.table) if schema is not None else []
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
        return dg.MaterializeResult(
            metadata={
                **revision_metadata(s, rev),
                **shown,
                **table_metadata(s, schema, done.entities, descriptions),
            },
            data_version=dg.DataVersion(data_version(s.table, rev.sequence)),
        )

    def handle_output(self, context: dg.OutputContext, obj: Any) -> None:
        raise UnexpectedOutputError(
            f"asset {context.asset_key.to_user_string()} returned {type(obj).__name__} to the "
            "revision IO manager, which loads inputs only: a revisioned asset commits in its "
            "body (declare it with featurized_asset, scoring_asset or reference_asset)"
        )

    def load_input(self, context: dg.InputContext) -> DataFrame | UpstreamChanges | None:
        consumer = self._consumer_slice(context)
        if consumer is not None:
            return self._load_changes(context, consumer)
        up = context.upstream_output
        assert up is not None and up.asset_key is not None
        address = TableAddress.from_metadata(up.definition_metadata, up.asset_key.to_user_string())
        ds = self.location.dataset(address.dataset, self.spark.spark_session)
        if not any(r.wrote(address.table) for r in ds.revisions()):
            raise UpstreamNotReadyError(
                f"input {up.asset_key.to_user_string()} ({ds.root}, table {address.table!r}) has "
                "no revision yet: materialize it first"
            )
        pdef = (
            _time_partitions(context.asset_partitions_def) if context.has_asset_partitions else None
        )
        if pdef is not None:
            end = compute_window(pdef, context.asset_partition_key_range, False)[1]
            return ds.read(address.table, as_of=end)
        return ds.read(address.table)

    def _consumer_slice(self, context: dg.InputContext) -> DatasetSlice | None:
        """The consuming asset's slice when it consumes this input as changes (scoring)."""
        step = context.step_context
        key = _step_asset_key(step)
        if key is None:
            return None
        refs = upstream_refs(step.assets_def.metadata_by_key[key])
        if not any(ref.input_name == context.name for ref in refs):
            return None
        return self.slice_for(context)

    def _load_changes(
        self, context: dg.InputContext, consumer: DatasetSlice
    ) -> UpstreamChanges | None:
        if consumer.skip is not None:
            return None  # the body commits nothing; do not plan a read
        u = consumer.input(context.name)
        ds = self.location.dataset(u.root, self.spark.spark_session)
        columns = consumer.uses_columns if u.ref.kind == "main" else None
        changes = changes_since(ds, u.ref.table, u.since, u.head, columns)
        context.log.info(
            f"{u.ref.asset_key}: changes since sequence {u.since} up to {u.head}"
            f"{' (reset)' if changes.is_reset else ''}"
        )
        return UpstreamChanges(changes, ds, u.ref.table, u.ref.id_columns, u.head, slice=u)
