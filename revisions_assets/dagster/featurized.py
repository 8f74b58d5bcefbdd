"""Featurized and reference assets: a PySpark function whose output becomes a revision.

``featurized_asset``: the function gets the source rows of the compute window
(extended back by ``lookback``) and the resolved slice, and returns one row per
entity it (re)computes. A minor computes the requested partitions; a major
every entity from the first partition's start up to the requested partitions or the
table's newest revision, whichever is later, and its materialization reports every
partition it covers (``resources.metadata.covered_materializations``).

``reference_asset``: an unpartitioned snapshot (e.g. a planes table). A minor
writes only the difference to the current state (changed rows, tombstones for
vanished ids), so consumers re-score only what the change touches.
"""

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

import dagster as dg
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from revisions_assets.core.columns import DELETED
from revisions_assets.core.errors import InvalidArgumentError
from revisions_assets.core.runs.run_slice import RunSlice

from .factory import AssetOptions, RevisionRunConfig, asset_decorator, asset_kwargs, io_manager
from .pipes import Launcher, remote_asset
from .resources.address import META_FIELD_VERSIONS, META_LOOKBACK, META_REMOTE, Role, TableAddress
from .source_version import SourceVersion, code_version_of

#: source rows of [start, end): (spark, start, end) -> DataFrame
WindowSource = Callable[[SparkSession, datetime, datetime], DataFrame]
Featurizer = Callable[[DataFrame, RunSlice], DataFrame]
Snapshot = Callable[[SparkSession], DataFrame]


def featurized_asset(
    *,
    id_columns: Sequence[str],
    partitions_def: dg.TimeWindowPartitionsDefinition,
    code_version: str | SourceVersion,
    source: WindowSource | None = None,
    lookback: timedelta = timedelta(0),
    name: str | None = None,
    dataset: str | None = None,
    table: str | None = None,
    field_versions: Mapping[str, str] | None = None,
    pipes: bool = False,
    options: AssetOptions | None = None,
    **asset_options: Any,
) -> Callable[[Featurizer | Launcher], dg.AssetsDefinition]:
    """Declare a time-partitioned featurized asset stored as one table of a revisioned dataset.

    The decorated function is ``fn(source_rows, window) -> DataFrame`` where ``window`` is
    the run's slice (``RunSlice``, resolved by the IO manager) and
    ``source_rows = source(spark, window.compute_start - lookback, window.compute_end)``.

    ``code_version``: bump it to make the next run a major, or ``SourceVersion()`` to derive
    it from the code of ``fn`` and ``source`` (``revisions_assets.dagster.source_version``).

    ``field_versions={column: version}``: fields whose version differs from ``code_version``
    (the default of every field). Bumping one makes a major; the versions of every field are
    recorded on each revision, so a scoring asset with ``uses_columns`` that reads none of
    the bumped fields re-scores nothing.

    ``options`` (an ``AssetOptions``), or the same options as keyword arguments
    (``group_name=``, ``columns=``, ``automation_condition=``, ``deps=``…): what goes to
    ``dg.asset`` as it is, and the IO manager's key. ``columns={column: Spark type}``
    declares the output (the catalog shows it before the first run; a run returning other
    columns fails with DeclaredColumnsError).

    ``pipes=True``: the asset's Spark runs in a remote job launched with Dagster Pipes
    (``revisions_assets.dagster.pipes``). The function is then ``fn(context, job, **clients)``
    and returns what its Pipes client's ``run(context=context, extras=job.extras, ...)``
    returns; the job reads its own sources (no ``source``) from ``job.window.start -
    job.window.lookback`` (see ``revisions_assets.pipes``).
    """
    opts = AssetOptions.merged(options, asset_options, "featurized_asset")
    if (source is None) != pipes:
        raise InvalidArgumentError(
            "featurized_asset: a remote job (pipes=True) reads its own sources, so it takes no "
            "source; otherwise give source=(spark, start, end) -> the rows of a window"
        )

    def decorator(fn: Featurizer | Launcher) -> dg.AssetsDefinition:
        asset_name = name or fn.__name__
        address = TableAddress(dataset or asset_name, table or asset_name, tuple(id_columns))
        kwargs = asset_kwargs(
            name=asset_name,
            address=address,
            role=Role.FEATURIZED,
            code_version=code_version_of(code_version, fn, source),
            partitions_def=partitions_def,
            default_description=fn.__doc__,
            metadata={
                **({META_FIELD_VERSIONS: dict(field_versions)} if field_versions else {}),
                **({META_LOOKBACK: str(lookback.total_seconds())} if lookback else {}),
                **({META_REMOTE: "pipes"} if pipes else {}),
            },
            options=opts,
        )
        if pipes:
            return remote_asset(kwargs, fn, opts.io_manager_key)

        @asset_decorator(**kwargs)
        def _featurized(
            context: dg.AssetExecutionContext, config: RevisionRunConfig
        ) -> dg.MaterializeResult:
            io = io_manager(context, opts.io_manager_key)
            window = io.slice_for(context)
            assert window.compute_start is not None and window.compute_end is not None
            context.log.info(
                f"{'major' if window.is_major else 'minor'} ({window.reason}): computing "
                f"{window.compute_start.date()} .. {window.compute_end.date()} (end exclusive)"
            )
            assert source is not None
            rows = source(io.session(), window.compute_start - window.lookback, window.compute_end)
            return io.materialize(context, fn(rows, window))

        return _featurized

    return decorator


def snapshot_changes(
    current: DataFrame, snapshot: DataFrame, id_columns: Sequence[str]
) -> DataFrame:
    """Rows of ``snapshot`` new or different from ``current``, tombstones for vanished ids."""
    ids = list(id_columns)
    changed = snapshot.exceptAll(current.select(*snapshot.columns))
    vanished = current.select(*ids).join(snapshot.select(*ids), ids, "left_anti")
    return changed.withColumn(DELETED, F.lit(False)).unionByName(
        vanished.withColumn(DELETED, F.lit(True)), allowMissingColumns=True
    )


def reference_asset(
    *,
    id_columns: Sequence[str],
    code_version: str | SourceVersion,
    name: str | None = None,
    dataset: str | None = None,
    table: str | None = None,
    options: AssetOptions | None = None,
    **asset_options: Any,
) -> Callable[[Snapshot], dg.AssetsDefinition]:
    """Declare an unpartitioned reference table: ``fn(spark) -> full snapshot DataFrame``.

    A major writes the snapshot; a minor only its difference to the current state
    (nothing committed when nothing changed). ``options`` (or its keyword arguments) as in
    ``featurized_asset``.
    """
    opts = AssetOptions.merged(options, asset_options, "reference_asset")

    def decorator(fn: Snapshot) -> dg.AssetsDefinition:
        asset_name = name or fn.__name__
        address = TableAddress(dataset or asset_name, table or asset_name, tuple(id_columns))

        @asset_decorator(
            **asset_kwargs(
                name=asset_name,
                address=address,
                role=Role.REFERENCE,
                code_version=code_version_of(code_version, fn),
                partitions_def=None,
                default_description=fn.__doc__,
                metadata={},
                options=opts,
            )
        )
        def _reference(
            context: dg.AssetExecutionContext, config: RevisionRunConfig
        ) -> dg.MaterializeResult:
            io = io_manager(context, opts.io_manager_key)
            window = io.slice_for(context)
            snapshot = fn(io.session())
            if not window.is_major:
                snapshot = snapshot_changes(io.current_state(window), snapshot, window.id_columns)
            return io.materialize(context, snapshot)

        return _reference

    return decorator
