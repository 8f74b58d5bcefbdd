"""Asset checks of revisioned assets (docs/guides/upkeep.md#checks): one function per check,
``revision_checks(asset)`` gathers those that apply. They read through the asset's IO
manager (its location's handle on the dataset: the engine's public reads and ``verify``),
never write.

Whole-table checks (unpartitioned):

- ``ids_unique_non_null``: ``verify --deep``'s id counts, on the revisions a default read
  reads from their own files (a compaction's ids are unique by construction);
- ``log_integrity``: ``revisions verify`` of the dataset: the log whole, every data file it
  references (but those a vacuum removed) present, a Parquet file whose footer parses and
  holding the rows its entry records;
- ``code_version``: the head revision was written by the asset's current code and field
  versions (WARN if stale);
- ``compaction_due``: no more revisions on top of the table's base than the location's
  ``compact_after`` policy allows (WARN: reads are slowing down, a compaction is due);
- ``partition_freshness`` (partitioned assets): when each partition's newest revision
  landed, and no partition between materialized ones never materialized (WARN);
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
- ``partition_schema``: its live rows (read as of that revision) validate against the
  pandera schema.
"""

import warnings
from collections.abc import Iterator, Sequence
from typing import Any

import dagster as dg

# the target of an AssetCheckEvaluation, a field of that public class (not exported on its own)
from dagster._core.definitions.asset_checks.asset_check_evaluation import (
    AssetCheckEvaluationTargetMaterializationData as TargetMaterialization,
)
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from revisions_assets import RevisionedDataset
from revisions_assets.core.columns import REVISION, REVISION_COLUMNS
from revisions_assets.core.errors import (
    CorruptFileError,
    MissingFileError,
    NoMajorRevisionError,
    UnknownTableError,
)
from revisions_assets.core.log.records import Revision
from revisions_assets.core.maintain.verify import merged_revisions, table_counts
from revisions_assets.core.timeutil import now_utc

from .factory import io_manager, io_manager_key_of
from .lag import consumer_lags, read_consumer
from .resources.address import address_of, field_versions, upstream_refs
from .resources.io_manager import RevisionsIOManager
from .resources.slice import (
    describe,
    keys_of,
    partition_gaps,
    partition_landings,
    revision_partitions,
    version_change,
)

#: the partitions ``partition_freshness`` lists, newest first
SHOWN_PARTITIONS = 31
#: verify's findings of a data file that is there but damaged (``log_integrity``'s count)
DAMAGED_FILES = ("corrupt_file", "row_count_mismatch", "compaction_damaged")


class _Reads:
    """What a check of ``asset`` reads, through the asset's IO manager: the run's snapshot of
    its dataset's log (the one the run's materialization committed to, when the check runs
    with it) and the dataset's handle."""

    def __init__(self, context: dg.AssetCheckExecutionContext, asset: dg.AssetsDefinition):
        self.io: RevisionsIOManager = io_manager(context, io_manager_key_of(asset))
        self.address = address_of(asset)
        self.table = self.address.table
        self.logs = self.io.run_state(context.run.run_id)
        self.snapshot = self.logs.snapshot(self.address.dataset)
        self.dataset: RevisionedDataset = self.snapshot.dataset  # type: ignore[assignment]

    def history(self) -> list[Revision]:
        """The table's data revisions, in sequence order (empty before the first)."""
        return [r for r in self.snapshot.revisions() if r.wrote(self.table)]

    def scan(self, **options: Any) -> DataFrame:
        """A read of the table on the snapshot (``read``'s options), as a Spark DataFrame."""
        self.io.session()
        return self.snapshot.scan(self.table, **options).to_spark()

    def id_counts(self, revisions: Sequence[Revision]) -> tuple[int, int]:
        """(null ids, ids repeated within a revision) of ``revisions``: verify's counts."""
        counts = table_counts(self.io.session(), self.dataset.storage, self.table, revisions)
        return sum(c.null_ids for _, c in counts), sum(c.duplicates for _, c in counts)


def _check(asset: dg.AssetsDefinition, name: str, description: str, **kwargs: Any) -> Any:
    """``dg.asset_check`` for a check of ``asset``, run with the asset's IO manager."""
    return dg.asset_check(
        asset=asset.key,
        name=name,
        description=description,
        required_resource_keys={io_manager_key_of(asset)},
        **kwargs,
    )


def ids_check(asset: dg.AssetsDefinition, blocking: bool) -> dg.AssetChecksDefinition:
    """``ids_unique_non_null``: the ids of the revisions a default read merges."""
    ids = list(address_of(asset).id_columns)

    @_check(
        asset,
        "ids_unique_non_null",
        f"Ids {ids} are non-null and unique within each revision a default read merges.",
        blocking=blocking,
    )
    def ids_unique_non_null(context: dg.AssetCheckExecutionContext) -> dg.AssetCheckResult:
        reads = _Reads(context, asset)
        try:
            direct, compaction = merged_revisions(reads.snapshot, reads.table)
        except (NoMajorRevisionError, UnknownTableError):
            return dg.AssetCheckResult(passed=False, metadata={"error": "no major revision yet"})
        try:
            nulls, duplicates = reads.id_counts(direct)
        except (MissingFileError, CorruptFileError) as exc:
            return _unreadable(exc)
        return dg.AssetCheckResult(
            passed=nulls == 0 and duplicates == 0,
            metadata={
                "null_ids": nulls,
                "duplicate_ids": duplicates,
                "revisions_checked": len(direct),
                "compaction": compaction.name if compaction else "",
            },
        )

    return ids_unique_non_null


def log_integrity_check(asset: dg.AssetsDefinition) -> dg.AssetChecksDefinition:
    """``log_integrity``: ``revisions verify`` of the asset's dataset."""

    @_check(
        asset,
        "log_integrity",
        "The dataset's log is whole and every data file it references exists and is a "
        "Parquet file holding the rows the log records (`revisions verify`).",
    )
    def log_integrity(context: dg.AssetCheckExecutionContext) -> dg.AssetCheckResult:
        reads = _Reads(context, asset)
        findings = reads.dataset.maintenance.verify()
        errors = [f for f in findings if f.severity == "error"]
        return dg.AssetCheckResult(
            passed=not errors,
            metadata={
                "revisions": len(reads.snapshot.revisions()),
                "errors": len(errors),
                "warnings": len(findings) - len(errors),
                "files_missing": sum(f.kind == "missing_file" for f in errors),
                "files_damaged": sum(f.kind in DAMAGED_FILES for f in errors),
                "findings_sample": dg.MetadataValue.json([f.message for f in findings[:10]]),
            },
        )

    return log_integrity


def code_version_check(asset: dg.AssetsDefinition) -> dg.AssetChecksDefinition:
    """``code_version``: the head revision was written by the asset's current versions."""
    current = asset.code_versions_by_key.get(asset.key)
    fields = field_versions(asset.metadata_by_key[asset.key])

    @_check(
        asset,
        "code_version",
        "The table's head revision was written by the asset's current code version (WARN "
        "when stale: a major is due).",
    )
    def code_version(context: dg.AssetCheckExecutionContext) -> dg.AssetCheckResult:
        reads = _Reads(context, asset)
        history = reads.history()
        head = history[-1] if history else None
        stale = version_change(head, reads.table, current, fields) if head else "no revision yet"
        return dg.AssetCheckResult(
            passed=stale is None,
            severity=dg.AssetCheckSeverity.WARN,
            metadata={
                "asset_code_version": current or "",
                "head_version": (head.version_of(reads.table) if head else None) or "",
                "head_sequence": head.sequence if head else 0,
                "stale": stale or "",
            },
        )

    return code_version


def compaction_check(asset: dg.AssetsDefinition) -> dg.AssetChecksDefinition:
    """``compaction_due``: the revisions on the table's base, against the policy."""

    @_check(
        asset,
        "compaction_due",
        "The table has at most the location's compact_after revisions on top of its base "
        "(WARN when past it: reads merge more files than the policy allows; materialize with "
        "the revisions/force_compaction tag or run `revisions compact`).",
    )
    def compaction_due(context: dg.AssetCheckExecutionContext) -> dg.AssetCheckResult:
        reads = _Reads(context, asset)
        policy = reads.io.location.compact_after
        try:
            on_base = reads.dataset.inspect.revisions_on_base(reads.table)
            _, compaction = merged_revisions(reads.snapshot, reads.table)
        except (NoMajorRevisionError, UnknownTableError):
            return dg.AssetCheckResult(passed=True, metadata={"revisions_on_base": 0})
        return dg.AssetCheckResult(
            passed=policy is None or on_base <= policy,
            severity=dg.AssetCheckSeverity.WARN,
            metadata={
                "revisions_on_base": on_base,
                "compact_after": policy if policy is not None else "never",
                "base": compaction.name if compaction else "major",
            },
        )

    return compaction_due


def freshness_check(
    asset: dg.AssetsDefinition, pdef: dg.TimeWindowPartitionsDefinition
) -> dg.AssetChecksDefinition:
    """``partition_freshness``: per partition, when its newest revision landed; the gaps."""

    @_check(
        asset,
        "partition_freshness",
        "When each partition's newest revision landed, and no partition between "
        "materialized ones that was never materialized (WARN on such gaps). Dagster's own "
        "freshness is not per partition: pair it with a FreshnessPolicy.",
    )
    def partition_freshness(context: dg.AssetCheckExecutionContext) -> dg.AssetCheckResult:
        reads = _Reads(context, asset)
        landed = partition_landings(reads.history(), pdef)
        gaps = partition_gaps(landed, pdef)
        newest = sorted(landed, reverse=True)[:SHOWN_PARTITIONS]
        metadata: dict[str, Any] = {
            "gaps": ", ".join(describe(g) for g in gaps) or "none",
            "missing_partitions": len(keys_of(pdef, gaps)),
            "partitions_landed": len(landed),
        }
        if landed:
            stalest = min(landed, key=lambda k: landed[k].committed_at)
            metadata |= {
                "newest_partition": newest[0],
                "newest_landed_at": _landed_at(landed[newest[0]]),
                "stalest_partition": stalest,
                "stalest_landed_at": _landed_at(landed[stalest]),
                "landings": dg.MetadataValue.table(
                    records=[
                        dg.TableRecord(
                            {
                                "partition": key,
                                "landed_at": _landed_at(landed[key]),
                                "revision": landed[key].name,
                                "kind": "major" if landed[key].is_major else "minor",
                                "sequence": landed[key].sequence,
                            }
                        )
                        for key in newest
                    ],
                    schema=LANDINGS,
                ),
            }
        return dg.AssetCheckResult(
            passed=not gaps, severity=dg.AssetCheckSeverity.WARN, metadata=metadata
        )

    return partition_freshness


def _landed_at(revision: Revision) -> str:
    return revision.committed_at.isoformat(timespec="seconds")


LANDINGS = dg.TableSchema(
    columns=[
        dg.TableColumn("partition", "string"),
        dg.TableColumn("landed_at", "string", description="the newest revision's commit time"),
        dg.TableColumn("revision", "string"),
        dg.TableColumn("kind", "string"),
        dg.TableColumn("sequence", "int"),
    ]
)


def schema_check(
    asset: dg.AssetsDefinition, schema: Any, blocking: bool
) -> dg.AssetChecksDefinition:
    """``schema``: pandera on the table's current state."""

    @_check(
        asset,
        "schema",
        f"The table's state validates against {schema!r} (pandera).",
        blocking=blocking,
    )
    def schema_(context: dg.AssetCheckExecutionContext) -> dg.AssetCheckResult:
        reads = _Reads(context, asset)
        try:
            return _validated(schema, reads.scan())
        except (MissingFileError, CorruptFileError) as exc:
            return _unreadable(exc)

    return schema_


def consumer_lag_check(
    asset: dg.AssetsDefinition, max_lag_revisions: int, max_lag_seconds: float | None
) -> dg.AssetChecksDefinition:
    """``consumer_lag``: how far a scoring asset is behind each upstream."""

    @_check(
        asset,
        "consumer_lag",
        f"Behind each upstream by at most {max_lag_revisions} revision(s)"
        + (f" and {max_lag_seconds} s" if max_lag_seconds is not None else "")
        + ".",
    )
    def consumer_lag(context: dg.AssetCheckExecutionContext) -> dg.AssetCheckResult:
        state = read_consumer(_Reads(context, asset).logs.log_of, asset)
        lags = consumer_lags(state.upstream, now_utc())
        ok = all(
            lag.revisions_behind <= max_lag_revisions
            and (max_lag_seconds is None or lag.seconds_behind <= max_lag_seconds)
            for lag in lags
        )
        return dg.AssetCheckResult(
            passed=ok,
            metadata={
                lag.upstream.input.asset_key: dg.MetadataValue.json(
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

    return consumer_lag


def revision_checks(
    asset: dg.AssetsDefinition,
    *,
    schema: Any | None = None,
    max_lag_revisions: int = 1,
    max_lag_seconds: float | None = None,
) -> list[dg.AssetChecksDefinition]:
    """The checks of one revisioned asset. ``schema``: a pandera.pyspark DataFrameModel/Schema.

    The checks of the revisions an asset's runs write are blocking: for a partitioned asset
    the partitioned ones (they run with each run); its whole-table ones run on their own, so
    blocking on them would hold automation back until someone executes them."""
    pdef = asset.partitions_def
    partitioned = pdef if isinstance(pdef, dg.TimeWindowPartitionsDefinition) else None
    blocking = partitioned is None
    checks = [
        ids_check(asset, blocking),
        log_integrity_check(asset),
        code_version_check(asset),
        compaction_check(asset),
    ]
    if partitioned is not None:
        checks.append(freshness_check(asset, partitioned))
    if schema is not None:
        checks.append(schema_check(asset, schema, blocking))
    if upstream_refs(asset.metadata_by_key[asset.key]):
        checks.append(consumer_lag_check(asset, max_lag_revisions, max_lag_seconds))
    if partitioned is not None:
        with warnings.catch_warnings():  # partitioned checks are a preview of Dagster 1.13
            warnings.simplefilter("ignore", dg.PreviewWarning)
            checks.append(partition_checks(asset, partitioned, schema))
    return checks


def runs_with(check: dg.AssetChecksDefinition, asset: dg.AssetsDefinition) -> bool:
    """Whether ``check`` (one of ``revision_checks(asset)``) runs with the asset's runs: the
    checks of the revision a run writes, blocking ones included (the partitioned checks of a
    partitioned asset, every check of an unpartitioned one)."""
    partitioned = any(spec.partitions_def is not None for spec in check.check_specs)
    return partitioned or asset.partitions_def is None


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


def partition_checks(
    asset: dg.AssetsDefinition,
    pdef: dg.TimeWindowPartitionsDefinition,
    schema: Any | None,
) -> dg.AssetChecksDefinition:
    """Checks of the revision that wrote a run's partitions, one result per partition.

    One multi-check reads that revision once; it yields an evaluation per partition of the
    run (a range run would otherwise get one evaluation for the whole range, shown as
    "skipped" on each of its partitions).
    """
    ids = list(address_of(asset).id_columns)
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
        required_resource_keys={io_manager_key_of(asset)},
    )
    def partition_checks(
        context: dg.AssetCheckExecutionContext,
    ) -> Iterator[dg.AssetCheckEvaluation | dg.Output]:
        reads = _Reads(context, asset)
        keys = context.partition_key_range
        rev = written_revision(reads.history(), pdef, keys, context.run.run_id)
        results: dict[str, tuple[bool, dict[str, Any]]] = {}
        if rev is None or not rev.tables[reads.table].files:
            nothing = {"revision": "none: no rows written for these partitions"}
            results = {spec.name: (True, nothing) for spec in specs}
        else:
            nulls, duplicates = reads.id_counts([rev])
            found = {"revision": rev.name, "null_ids": nulls, "duplicate_ids": duplicates}
            results[specs[0].name] = (nulls == 0 and duplicates == 0, found)
            if schema is not None:
                errors = dict(schema.validate(_written_rows(reads, rev)).pandera.errors)
                results["partition_schema"] = (
                    not errors,
                    {"revision": rev.name, "errors": dg.MetadataValue.json(errors)},
                )
        selected = {k.name: k for k in context.selected_asset_check_keys}
        partitions = _checked_partitions(context, pdef, rev)
        targets = {key: _target(context, asset.key, key) for key in partitions}
        outputs = context.op_execution_context.assets_def
        for name, (passed, metadata) in results.items():
            if name not in selected:
                continue
            for key in partitions:
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

    return partition_checks


def _checked_partitions(
    context: dg.AssetCheckExecutionContext,
    pdef: dg.TimeWindowPartitionsDefinition,
    rev: Revision | None,
) -> list[str]:
    """The partitions a run's checks report on: the run's, and every other one its revision
    covers (a major launched for one partition reports them all: their materializations are
    checked as the run's own, or the scores that consume them would wait for checks that
    never run)."""
    keys = set(context.partition_keys)
    if rev is not None and rev.producer.get("run_id") == context.run.run_id:
        keys |= keys_of(pdef, [revision_partitions(rev, pdef)])
    return sorted(keys, key=lambda key: pdef.time_window_for_partition_key(key).start)


def _written_rows(reads: _Reads, rev: Revision) -> DataFrame:
    """The live rows ``rev`` wrote, as a read at that revision has them."""
    state = reads.scan(at=rev.sequence, with_revision=True)
    return state.filter(F.col(REVISION) == rev.name).drop(*REVISION_COLUMNS)


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


def _unreadable(exc: MissingFileError | CorruptFileError) -> dg.AssetCheckResult:
    """A data check on a dataset whose files a read refuses: failed, saying why (the
    ``log_integrity`` check lists every such file), never an execution error."""
    return dg.AssetCheckResult(passed=False, metadata={"error": str(exc)})


def _validated(schema: Any, rows: DataFrame) -> dg.AssetCheckResult:
    errors = dict(schema.validate(rows).pandera.errors)
    return dg.AssetCheckResult(
        passed=not errors, metadata={"errors": dg.MetadataValue.json(errors)}
    )
