"""Asset checks of revisioned assets (docs/guides/first-assets.md). They read logs and data files,
never write.

Whole-table checks (unpartitioned):

- ``ids_unique_non_null``: in the data files of every revision a default read sees (``verify
  --deep``'s counts);
- ``log_integrity``: every data file the log references (but those a vacuum removed) exists
  and is a Parquet file whose footer parses, and each entry's files hold the rows it
  records: ``revisions verify``'s file checks;
- ``code_version``: the head revision was written by the asset's current code and field
  versions (WARN if stale);
- ``compaction_due``: no more revisions on top of the table's base than the location's
  ``compact_after`` policy allows (WARN: reads are slowing down, a compaction is due);
- ``schema``: a pandera (pandera.pyspark) schema on the table's current state;
- ``consumer_lag`` (scoring assets): revisions/time behind each upstream within a bound.

The id and schema checks of the revisions an asset's runs write are ``blocking`` (a failure
has ERROR severity and fails the run): the partitioned ones of a partitioned asset, the
whole-table ones of an unpartitioned one. ``revisions_automation()`` (through
``AutomationCondition.all_deps_blocking_checks_passed()``) then requests no scoring run while
a revision it would consume failed one of them.

Partitioned checks (time-partitioned assets; they run with the asset's own runs, for the
partitions the run materialized), on the revision that wrote those partitions:

- ``partition_ids_unique_non_null``: its ids are non-null and unique;
- ``partition_schema``: its live rows validate against the pandera schema.

A carrying major's files hold only its changed rows and tombstones: the partitioned
checks see those, and the rows it carries were checked with the revisions that wrote
them (``ids_unique_non_null`` reads the carried revisions too: a default read merges them).
"""

import warnings
from collections.abc import Iterator, Sequence
from dataclasses import replace
from functools import reduce
from typing import Any

import dagster as dg

# the target of an AssetCheckEvaluation, a field of that public class (not exported on its own)
from dagster._core.definitions.asset_checks.asset_check_evaluation import (
    AssetCheckEvaluationTargetMaterializationData as TargetMaterialization,
)
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import BooleanType, StructField, StructType

from revisions_assets.core.columns import DELETED, REVISION
from revisions_assets.core.errors import NoMajorRevisionError
from revisions_assets.core.log.records import Revision
from revisions_assets.core.maintain.verify import RevisionCounts, file_findings, revision_counts
from revisions_assets.core.read.execute.spark_scan import spark_schema
from revisions_assets.core.read.plan.scans import MergePlan, ScanTask, head_plan, scan_task
from revisions_assets.core.read.plan.schema import Schema
from revisions_assets.core.storage.backends import open_storage
from revisions_assets.core.timeutil import now_utc

from .lag import consumer_lags, read_consumer
from .resources.address import TableAddress, address_of, field_versions, upstream_refs
from .resources.keys import LOCATION_KEY, SPARK_KEY
from .resources.location import DatasetLocation
from .resources.slice import describe, keys_of, revision_partitions, version_change

_RESOURCES = {LOCATION_KEY, SPARK_KEY}


def files_frame(spark: SparkSession, root: str, tasks: Sequence[ScanTask]) -> DataFrame | None:
    """The rows of the data files of ``tasks`` and ``_deleted``, tagged with the revision
    name; None when they wrote no file."""
    storage = open_storage(root)
    frames = []
    for task in tasks:
        fields = [*spark_schema(task.schema).fields, StructField(DELETED, BooleanType(), True)]
        files = [storage.spark_uri(f) for f in task.files]
        if files:  # the schema is given: no footer-reading job per read
            df = spark.read.schema(StructType(fields)).parquet(*files)
            frames.append(df.withColumn(REVISION, F.lit(task.entry)))
    if not frames:
        return None
    return reduce(lambda a, b: a.unionByName(b, allowMissingColumns=True), frames)


def written_revision(
    history: Sequence[Revision],
    partitions_def: dg.TimeWindowPartitionsDefinition,
    keys: dg.PartitionKeyRange,
    run_id: str,
) -> Revision | None:
    """The revision a run wrote, else the newest revision covering any of ``keys``."""
    mine = [r for r in history if r.producer.get("run_id") == run_id]
    if mine:
        return mine[-1]
    wanted = keys_of(partitions_def, [keys])
    covering = [
        r
        for r in history
        if wanted & keys_of(partitions_def, [revision_partitions(r, partitions_def)])
    ]
    return covering[-1] if covering else None


class _Reader:
    """What a check reads, through the check's resources: read-only logs and files."""

    def __init__(self, context: dg.AssetCheckExecutionContext, address: TableAddress):
        self.location: DatasetLocation = getattr(context.resources, LOCATION_KEY)
        self.address = address

    @property
    def root(self) -> str:
        return self.location.root_for(self.address.dataset)

    def revisions(self) -> list[Revision]:
        return [
            r for r in self.location.read_log(self.address.dataset) if r.wrote(self.address.table)
        ]

    def counts(
        self, spark: SparkSession, schema: Schema, tasks: Sequence[ScanTask]
    ) -> list[RevisionCounts]:
        """verify --deep's counts (rows, null and repeated ids) of the revisions ``tasks``
        read, in one Spark job."""
        storage = open_storage(self.root)
        ids = list(self.address.id_columns)
        tasks = [replace(t, order=n) for n, t in enumerate(tasks)]
        return revision_counts(spark, storage, schema, ids, tasks)

    def default_plan(self) -> MergePlan:
        """How a default read of the table reads it now: a base (major or compaction) and the
        revisions read from their own files. NoMajorRevisionError before the first major."""
        view = self.location.read_view(self.address.dataset)
        table = self.address.table
        if table not in view.tables():
            raise NoMajorRevisionError(f"table {table!r} has no revision yet")
        return head_plan(view, table)


def revision_checks(
    asset: dg.AssetsDefinition,
    *,
    schema: Any | None = None,
    max_lag_revisions: int = 1,
    max_lag_seconds: float | None = None,
) -> list[dg.AssetChecksDefinition]:
    """The checks of one revisioned asset. ``schema``: a pandera.pyspark DataFrameModel/Schema."""
    address = address_of(asset)
    key = asset.key
    code_version = asset.code_versions_by_key.get(key)
    fields = field_versions(asset.metadata_by_key[key])
    ids = list(address.id_columns)

    def spark(context: dg.AssetCheckExecutionContext) -> SparkSession:
        return getattr(context.resources, SPARK_KEY).spark_session

    checks = []
    # the checks of the revisions an asset's runs write: for a partitioned asset the
    # partitioned ones (they run with each run); the whole-table ones run on their own there,
    # so blocking on them would hold automation back until someone executes them
    blocking = not isinstance(asset.partitions_def, dg.TimeWindowPartitionsDefinition)

    @dg.asset_check(
        asset=key,
        name="ids_unique_non_null",
        required_resource_keys=_RESOURCES,
        blocking=blocking,
        description=f"Ids {ids} are non-null and unique within each revision a default read "
        "merges.",
    )
    def ids_unique_non_null(context: dg.AssetCheckExecutionContext) -> dg.AssetCheckResult:
        read = _Reader(context, address)
        try:
            plan = read.default_plan()
        except NoMajorRevisionError:
            return dg.AssetCheckResult(passed=False, metadata={"error": "no major revision yet"})
        # the revisions read from their own files; a compaction's ids are unique by construction
        direct = [t for t in plan.tasks if not t.is_compaction]
        counts = read.counts(spark(context), plan.schema, direct)
        nulls = sum(c.null_ids for c in counts)
        duplicates = sum(c.duplicates for c in counts)
        return dg.AssetCheckResult(
            passed=nulls == 0 and duplicates == 0,
            metadata={
                "null_ids": nulls,
                "duplicate_ids": duplicates,
                "revisions_checked": len(direct),
                "compaction": plan.compaction.record.name if plan.compaction else "",
            },
        )

    checks.append(ids_unique_non_null)

    @dg.asset_check(
        asset=key,
        name="log_integrity",
        required_resource_keys=_RESOURCES,
        description="Every data file referenced by the dataset's log exists and is a Parquet "
        "file holding the rows the log records (the file checks of `revisions verify`).",
    )
    def log_integrity(context: dg.AssetCheckExecutionContext) -> dg.AssetCheckResult:
        read = _Reader(context, address)
        view = read.location.read_view(address.dataset)
        storage = open_storage(read.root)
        # verify's file checks: inside the root, present, footers that parse, row counts
        findings = file_findings(storage, view.records, view.removed)
        referenced = {
            f
            for r in view.records
            if not view.is_removed(r.sequence)
            for t in r.tables.values()
            for f in t.files
        }
        return dg.AssetCheckResult(
            passed=not findings,
            metadata={
                "revisions": len(view.records),
                "files_referenced": len(referenced),
                "files_missing": sum(f.kind == "missing_file" for f in findings),
                "files_damaged": sum(f.kind != "missing_file" for f in findings),
                "findings_sample": dg.MetadataValue.json([f.message for f in findings[:10]]),
            },
        )

    checks.append(log_integrity)

    @dg.asset_check(
        asset=key,
        name="code_version",
        required_resource_keys=_RESOURCES,
        description="The table's head revision was written by the asset's current "
        "code version (WARN when stale: a major is due).",
    )
    def code_version_check(context: dg.AssetCheckExecutionContext) -> dg.AssetCheckResult:
        history = _Reader(context, address).revisions()
        head = history[-1].version_of(address.table) if history else None
        stale = (
            version_change(history[-1], address.table, code_version, fields)
            if history
            else "no revision yet"
        )
        return dg.AssetCheckResult(
            passed=stale is None,
            severity=dg.AssetCheckSeverity.WARN,
            metadata={
                "asset_code_version": code_version or "",
                "head_version": head or "",
                "head_sequence": history[-1].sequence if history else 0,
                "stale": stale or "",
            },
        )

    checks.append(code_version_check)

    @dg.asset_check(
        asset=key,
        name="compaction_due",
        required_resource_keys=_RESOURCES,
        description="The table has at most the location's compact_after revisions on top of "
        "its base (WARN when past it: reads merge more files than the policy allows; "
        "materialize with the revisions/force_compaction tag or run `revisions compact`).",
    )
    def compaction_due(context: dg.AssetCheckExecutionContext) -> dg.AssetCheckResult:
        read = _Reader(context, address)
        policy = read.location.compact_after
        try:
            plan = read.default_plan()
        except NoMajorRevisionError:
            return dg.AssetCheckResult(passed=True, metadata={"revisions_on_base": 0})
        return dg.AssetCheckResult(
            passed=policy is None or plan.on_base <= policy,
            severity=dg.AssetCheckSeverity.WARN,
            metadata={
                "revisions_on_base": plan.on_base,
                "compact_after": policy if policy is not None else "never",
                "base": plan.compaction.record.name if plan.compaction else "major",
            },
        )

    checks.append(compaction_due)

    if schema is not None:

        @dg.asset_check(
            asset=key,
            name="schema",
            required_resource_keys=_RESOURCES,
            blocking=blocking,
            description=f"The table's state validates against {schema!r} (pandera).",
        )
        def schema_check(context: dg.AssetCheckExecutionContext) -> dg.AssetCheckResult:
            read = _Reader(context, address)
            state = read.location.read_state(spark(context), address.dataset, address.table)
            return _validated(schema, state)

        checks.append(schema_check)

    if upstream_refs(asset.metadata_by_key[key]):

        @dg.asset_check(
            asset=key,
            name="consumer_lag",
            required_resource_keys=_RESOURCES,
            description=f"Behind each upstream by at most {max_lag_revisions} "
            "revision(s)"
            + (f" and {max_lag_seconds} s" if max_lag_seconds is not None else "")
            + ".",
        )
        def consumer_lag(context: dg.AssetCheckExecutionContext) -> dg.AssetCheckResult:
            state = read_consumer(_Reader(context, address).location, asset)
            lags = consumer_lags(state.upstream, now_utc())
            ok = all(
                lag.revisions_behind <= max_lag_revisions
                and (max_lag_seconds is None or lag.seconds_behind <= max_lag_seconds)
                for lag in lags
            )
            return dg.AssetCheckResult(
                passed=ok,
                metadata={
                    lag.upstream.ref.asset_key: dg.MetadataValue.json(
                        {
                            "position": lag.upstream.since,
                            "head": lag.upstream.head,
                            "revisions_behind": lag.revisions_behind,
                            "seconds_behind": round(lag.seconds_behind, 1),
                        }
                    )
                    for lag in lags
                }
                | {"max_revisions_behind": max((lag.revisions_behind for lag in lags), default=0)},
            )

        checks.append(consumer_lag)

    if isinstance(asset.partitions_def, dg.TimeWindowPartitionsDefinition):
        with warnings.catch_warnings():  # partitioned checks are a preview of Dagster 1.13
            warnings.simplefilter("ignore", dg.PreviewWarning)
            checks.extend(_partition_checks(asset, address, asset.partitions_def, schema))
    return checks


def runs_with(check: dg.AssetChecksDefinition, asset: dg.AssetsDefinition) -> bool:
    """Whether ``check`` (one of ``revision_checks(asset)``) runs with the asset's runs: the
    checks of the revision a run writes, blocking ones included (the partitioned checks of a
    partitioned asset, every check of an unpartitioned one)."""
    partitioned = any(spec.partitions_def is not None for spec in check.check_specs)
    return partitioned or asset.partitions_def is None


def _partition_checks(
    asset: dg.AssetsDefinition,
    address: TableAddress,
    pdef: dg.TimeWindowPartitionsDefinition,
    schema: Any | None,
) -> list[dg.AssetChecksDefinition]:
    """Checks of the revision that wrote a run's partitions, one result per partition.

    One multi-check reads that revision once; it yields an evaluation per partition of the
    run (a range run would otherwise get one evaluation for the whole range, shown as
    "skipped" on each of its partitions).
    """
    ids = list(address.id_columns)
    specs = [
        dg.AssetCheckSpec(
            "partition_ids_unique_non_null",
            asset=asset.key,
            partitions_def=pdef,
            blocking=True,
            description=f"Ids {ids} of the revision that wrote the partition are non-null and "
            "unique.",
        )
    ]
    if schema is not None:
        specs.append(
            dg.AssetCheckSpec(
                "partition_schema",
                asset=asset.key,
                partitions_def=pdef,
                blocking=True,
                description="The rows of the revision that wrote the partition validate "
                f"against {schema!r} (pandera).",
            )
        )

    @dg.multi_asset_check(
        specs=specs,
        name=f"{asset.key.to_python_identifier()}_partition_checks",
        can_subset=True,
        required_resource_keys=_RESOURCES,
    )
    def partition_checks(
        context: dg.AssetCheckExecutionContext,
    ) -> Iterator[dg.AssetCheckEvaluation | dg.Output]:
        read = _Reader(context, address)
        keys = context.partition_key_range
        rev = written_revision(read.revisions(), pdef, keys, context.run.run_id)
        spark = getattr(context.resources, SPARK_KEY).spark_session
        task = scan_task(rev, address.table, 0) if rev else None
        results: dict[str, tuple[bool, dict[str, Any]]] = {}
        if task is None or not task.files:
            nothing = {"revision": "none: no rows written for these partitions"}
            results = {spec.name: (True, nothing) for spec in specs}
        else:
            (counts,) = read.counts(spark, task.schema, [task])
            nulls, duplicates = counts.null_ids, counts.duplicates
            found = {"revision": rev.name, "null_ids": nulls, "duplicate_ids": duplicates}
            results[specs[0].name] = (nulls == 0 and duplicates == 0, found)
            if schema is not None:
                rows = files_frame(spark, read.root, [task])
                assert rows is not None  # the task wrote files
                live = rows.filter(~F.coalesce(F.col(DELETED), F.lit(False)))
                errors = dict(schema.validate(live.drop(DELETED, REVISION)).pandera.errors)
                results["partition_schema"] = (
                    not errors,
                    {"revision": rev.name, "errors": dg.MetadataValue.json(errors)},
                )
        selected = {k.name: k for k in context.selected_asset_check_keys}
        targets = {key: _target(context, asset.key, key) for key in context.partition_keys}
        outputs = context.op_execution_context.assets_def
        for name, (passed, metadata) in results.items():
            if name not in selected:
                continue
            for key in context.partition_keys:
                # yielded (not logged) so that a failure of these blocking checks fails the step
                yield dg.AssetCheckEvaluation(
                    asset_key=asset.key,
                    check_name=name,
                    passed=passed,
                    metadata={**metadata, "run_partitions": describe(keys)},
                    partition=key,
                    blocking=True,
                    target_materialization_data=targets[key],
                )
            # the check's output, as Dagster yields it for an AssetCheckResult: without it the
            # step logs that the op "did not yield or return expected outputs"
            yield dg.Output(
                None, output_name=outputs.get_output_name_for_asset_check_key(selected[name])
            )

    return [partition_checks]


def _target(
    context: dg.AssetCheckExecutionContext, key: dg.AssetKey, partition: str
) -> TargetMaterialization | None:
    """The materialization a partition's evaluation checks, as ``AssetCheckResult`` records it
    for a single partition: without it, Dagster takes the result for one of an older
    materialization, and ``all_deps_blocking_checks_passed()`` never sees it pass."""
    found = context.instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=key, asset_partitions=[partition]), limit=1
    ).records
    if not found:
        return None
    return TargetMaterialization(
        run_id=found[0].event_log_entry.run_id,
        storage_id=found[0].storage_id,
        timestamp=found[0].timestamp,
    )


def _validated(schema: Any, rows: DataFrame) -> dg.AssetCheckResult:
    errors = dict(schema.validate(rows).pandera.errors)
    return dg.AssetCheckResult(
        passed=not errors, metadata={"errors": dg.MetadataValue.json(errors)}
    )
