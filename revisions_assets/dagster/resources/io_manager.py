"""The revision IO manager: every materialization is one revision of a revisioned dataset.

It is the one resolver, as Dagster's ``DbIOManager`` is: ``slice_for`` turns the
run's context (asset key, partition range, run tags, config, code version) and
the dataset logs into one frozen ``RunSlice`` (``revisions_assets.core.runs``), once per
run and asset, reading the logs only (no JVM: a run refused by its slice fails before Spark
starts), and ``load_input``, the asset body and ``materialize`` all read that same object.
Every read is a scan of the run's one snapshot of each log (``snapshot``: taken on the run's
first read of that log, taken again after the run's own commit), through the location's one
handle per dataset, pinned at the positions the slice recorded:

- ``load_input`` gives a scoring asset, per input, the changes since the position
  its slice recorded, pinned to the slice's head; any other consumer gets the
  state of the table as of the end of its input partitions (or the latest state);
- the asset body asks ``slice_for`` for its window, major or minor;
- ``materialize``, called by the asset body with the DataFrame it computed, commits it
  with the slice's timestamp, version, positions and precondition, and returns the
  body's MaterializeResult: the revision as metadata (Dagster's table conventions
  included) and as the data version (``handle_output`` only refuses outputs); every other
  partition the revision covers (a major launched for one partition covers them all) is
  reported in the same run as a materialization of that partition, with the revision's
  code version, data version and metadata, so the catalog agrees with the log. It
  commits with ``skip_unchanged``: a minor writes only the rows whose values
  changed, and a major is written as a carrying major where it can be (its rows
  are the complete new state, only the changed ones and tombstones are written);
  a scoring asset's soft major is committed with ``carry=True`` instead (its rows
  are the re-scored entities and tombstones, written as they are; every other
  score is kept).
"""

from collections.abc import Mapping, Sequence
from typing import Any

import dagster as dg
from dagster._check import CheckError  # what a step context without a code location raises
from pydantic import Field, PrivateAttr
from pyspark.sql import DataFrame, SparkSession

from revisions_assets.core.errors import ArgumentTypeError, RevisionsError
from revisions_assets.core.log.records import Revision
from revisions_assets.core.read.scan import DatasetSnapshot
from revisions_assets.core.runs.commit import CommittedRun, commit_run
from revisions_assets.core.runs.consume import changes_since
from revisions_assets.core.runs.resolve import consumer_timestamp, major_window_end
from revisions_assets.core.runs.run_slice import RunSlice
from revisions_assets.core.runs.versions import decide_major
from revisions_assets.core.timeutil import now_utc
from revisions_assets.core.uris import describe

from .address import (
    NotRevisionedAssetError,
    TableAddress,
    column_descriptions,
    field_versions,
    lookback,
    runs_remotely,
    upstream_refs,
    uses_columns,
)
from .location import DatasetLocation
from .metadata import (
    COLUMN_SCHEMA,
    compaction_metadata,
    coverage_entries,
    covered_materializations,
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
    UpstreamNotReadyError,
    check_requested_partitions,
    compute_window,
    fit_to_partitions,
    parse_upstream_heads,
    plan_consumer,
    truthy,
    upstream_slices,
)
from .slice import (
    describe as describe_keys,
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


def range_hint(step: Any, key: dg.AssetKey) -> str:
    """What requests a scoring asset's runs in this code location, named in a
    ``ScoringRangeError``: the sensors that target it (an automation condition sensor when the
    asset has a condition), else how to launch the range or what to add."""
    conditioned = step.assets_def.automation_conditions_by_key.get(key) is not None
    try:
        repository = step.repository_def
    except CheckError:  # a run without a code location (dg.materialize): no sensor to name
        repository = None
    sensors = [
        sensor.name
        for sensor in (repository.sensor_defs if repository is not None else [])
        if key in _sensor_targets(sensor, repository)
        and (conditioned or not isinstance(sensor, dg.AutomationConditionSensorDefinition))
    ]
    named = f"the sensor{'s' if len(sensors) > 1 else ''} {' and '.join(map(repr, sensors))}"
    if sensors and conditioned:
        return f"its automation condition requests exactly that, on {named} of this code location"
    if sensors:
        return f"{named} of this code location requests exactly that"
    if conditioned:
        return (
            "its automation condition requests exactly that once a revisions_automation_sensor "
            "targets the asset; no sensor of this code location does yet"
        )
    return (
        "no sensor of this code location requests this asset's runs: launch that range, or give "
        "the asset revisions_automation() with a revisions_automation_sensor"
    )


def _sensor_targets(sensor: dg.SensorDefinition, repository: Any) -> set[dg.AssetKey]:
    """The assets a sensor of ``repository`` requests: its asset selection (an automation
    condition sensor), else the assets of the jobs it targets (``target=`` of ``dg.sensor``)."""
    if sensor.asset_selection is not None:
        return set(sensor.asset_selection.resolve(repository.asset_graph, allow_missing=True))
    jobs = [repository.get_job(target.job_name) for target in sensor.targets]
    return {key for job in jobs for key in job.asset_layer.selected_asset_keys}


class RevisionsIOManager(dg.ConfigurableIOManager):
    """Writes each materialization as a revision; loads inputs as Spark DataFrames."""

    location: dg.ResourceDependency[DatasetLocation] = Field(
        description="Where the datasets live (DatasetLocation)."
    )
    spark: dg.ResourceDependency[SparkSessionResource] = Field(
        description="The Spark session resource used for reads and writes."
    )
    _slices: dict[tuple[str, str], RunSlice] = PrivateAttr(default_factory=dict)
    _snapshots: dict[tuple[str, str], DatasetSnapshot] = PrivateAttr(default_factory=dict)

    # -- the run's logs --------------------------------------------------------------------

    def snapshot(self, run_id: str, dataset: str, *, refresh: bool = False) -> DatasetSnapshot:
        """The run's snapshot of a dataset's log (``dataset``: a name or a root), taken on
        its first read and kept, so that the run's slice, inputs and checks all read one
        state of each log however many commits land meanwhile. ``refresh``: take it again
        (after the run's own commit, which its checks and the assets downstream read)."""
        ds = self.location.dataset(dataset)
        key = (run_id, ds.root)
        if refresh or key not in self._snapshots:
            self._snapshots[key] = ds.snapshot()
        return self._snapshots[key]

    def _logs_of(self, run_id: str) -> Any:
        """``log_of(dataset)`` for the slice rules: an upstream's (root, log), on the run's
        snapshot."""

        def log_of(dataset: str) -> tuple[str, tuple[Revision, ...]]:
            snapshot = self.snapshot(run_id, dataset)
            return snapshot.root, tuple(snapshot.revisions())

        return log_of

    # -- the resolver ----------------------------------------------------------------------

    def slice_for(self, context: AnyContext) -> RunSlice:
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

    def _resolve(self, step: Any, key: dg.AssetKey) -> RunSlice:
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
        # the logs only, through the location's handles; a remote job commits (read-only here)
        writes = None if runs_remotely(metadata) else {address.table: address.id_columns}
        own = self.location.dataset(address.dataset, writes=writes)
        records = tuple(self.snapshot(step.run_id, own.root).revisions())
        history = [r for r in records if r.wrote(address.table)]
        declared = metadata.get(COLUMN_SCHEMA)
        common: dict[str, Any] = {
            "asset_key": key.to_user_string(),
            "root": own.root,
            "table": address.table,
            "id_columns": address.id_columns,
            "code_version": code_version,
            "run_id": step.run_id,
            "partition": describe_keys(keys) if keys is not None else "",
            "partition_keys": tuple(pdef.get_partition_keys_in_range(keys)) if keys else (),
            "columns": (
                {c.name: c.type for c in table_schema(declared).columns}
                if declared is not None
                else None
            ),
            "force_compaction": compact,
            "compact_after": self.location.compact_after,
            "expected_head": records[-1].sequence if records else 0,
        }
        refs = upstream_refs(metadata)
        if not refs:
            fields = field_versions(metadata)
            is_major, reason = decide_major(
                history[-1] if history else None, address.table, code_version, forced, fields
            )
            start, end = compute_window(pdef, keys, is_major) if keys is not None else (None, None)
            if end is not None and is_major:
                end = major_window_end(history, end)
            return RunSlice(
                **common,
                is_major=is_major,
                reason=reason,
                timestamp=end or now_utc(),
                compute_start=start,
                compute_end=end,
                lookback=lookback(metadata),
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
                self._logs_of(step.run_id),
                keys,
                pdef,
            )
        else:
            pins = parse_upstream_heads(pin_tag)
            upstream = upstream_slices(
                refs, records, address.table, self._logs_of(step.run_id), pins
            )
            plan = plan_consumer(history, address.table, code_version, forced, upstream, pdef)
        if plan.covers is not None:
            check_requested_partitions(
                key.to_user_string(), plan, keys, history, pdef, range_hint(step, key)
            )
        return RunSlice(
            **common,
            is_major=plan.is_major,
            reason=plan.reason,
            timestamp=consumer_timestamp(history, compute_window(pdef, keys, False)[1]),
            upstream=tuple(u.input for u in plan.upstream),
            skip=None if plan.covers is not None else plan.reason,
            soft=plan.soft,
            uses_columns=uses_columns(metadata),
        )

    def current_state(self, s: RunSlice) -> DataFrame:
        """The slice's table at the log head the run started from (a reference minor commits
        only its difference)."""
        self.session()
        return self.snapshot(s.run_id, s.root).scan(s.table, at=s.expected_head).to_spark()

    def session(self) -> SparkSession:
        """The run's Spark session, started with the Spark resource's settings: call it before
        reading data through the location's handles, which read with the process's session.
        Resolving a slice needs none (no JVM for a run its slice refuses)."""
        return self.spark.spark_session

    # -- inputs and outputs ----------------------------------------------------------------

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
        self.session()
        ds = self.location.dataset(s.root, writes={s.table: s.id_columns})
        done = commit_run(ds, s, obj)
        records = self.snapshot(s.run_id, s.root, refresh=True).revisions()
        return self.materialization(context, done, records, metadata)

    def materialization(
        self,
        context: dg.AssetExecutionContext,
        done: CommittedRun,
        records: Sequence[Revision],
        metadata: Mapping[str, Any] | None = None,
    ) -> dg.MaterializeResult:
        """The MaterializeResult of a run's commit, read from the log (``records``, read after
        it, the run's snapshot taken again): the revision as metadata (Dagster's table
        conventions included) and as the data version; the other partitions the revision
        covers are reported with it (``covered_materializations``). The same for a commit
        made in process and one a remote job made."""
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
        tables = self.snapshot(s.run_id, s.root).tables()
        schema = tables[s.table].schema if s.table in tables else None
        shown = {
            **compaction_metadata(s.table, done.compaction),
            **slice_metadata(s),
            **(metadata or {}),
        }
        rev = done.revision
        if rev is None:
            history = [r for r in records if r.wrote(s.table)]
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
        pdef = _time_partitions(context.assets_def.partitions_def)
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
        snapshot = self.snapshot(context.step_context.run_id, address.dataset)
        if not any(r.wrote(address.table) for r in snapshot.revisions()):
            raise UpstreamNotReadyError(
                f"input {up.asset_key.to_user_string()} ({snapshot.root}, table "
                f"{address.table!r}) has no revision yet: materialize it first"
            )
        self.session()
        pdef = (
            _time_partitions(context.asset_partitions_def) if context.has_asset_partitions else None
        )
        end = compute_window(pdef, context.asset_partition_key_range, False)[1] if pdef else None
        return snapshot.scan(address.table, as_of=end).to_spark()

    def _consumer_slice(self, context: dg.InputContext) -> RunSlice | None:
        """The consuming asset's slice when it consumes this input as changes (scoring)."""
        step = context.step_context
        key = _step_asset_key(step)
        if key is None:
            return None
        refs = upstream_refs(step.assets_def.metadata_by_key[key])
        if not any(ref.input_name == context.name for ref in refs):
            return None
        return self.slice_for(context)

    def _load_changes(self, context: dg.InputContext, consumer: RunSlice) -> UpstreamChanges | None:
        if consumer.skip is not None:
            return None  # the body commits nothing; do not plan a read
        u = consumer.input(context.name)
        self.session()
        snapshot = self.snapshot(consumer.run_id, u.root)
        compared = consumer.uses_columns if u.kind == "main" else None
        changes = changes_since(snapshot, u.table, u.since, u.head, compared)
        context.log.info(
            f"{u.asset_key}: changes since sequence {u.since} up to {u.head}"
            f"{' (reset)' if changes.is_reset else ''}"
        )
        return UpstreamChanges(changes, snapshot, u.table, u.id_columns, u.head, slice=u)
