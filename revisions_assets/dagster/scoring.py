"""Scoring assets: a PySpark function over the changes of upstream revisioned tables.

Exactly-once (SPEC §6): each input is read as the changes since the position
recorded in this asset's own last revision, pinned to the upstream head at
load time; the commit records the pinned heads as the new positions and is
guarded by the positions it started from (a concurrent duplicate gets
ConsumerPositionConflictError, a failed run commits nothing).

Reference inputs (reverse join): a changed reference row re-scores exactly
the main entities that join to it. Only the reference rows those entities
need are read (a semi-join against a broadcast of their keys: a filtered join
planned by Spark, nothing is collected).
"""

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import reduce
from typing import Any

import dagster as dg
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from resources.keys import IO_MANAGER_KEY
from resources.slice import (
    META_UPSTREAM,
    DatasetSlice,
    TableAddress,
    UpstreamRef,
    address_of,
    resolve_slice,
    upstream_refs_to_metadata,
)
from resources.values import META_CONSUMER, META_READ, RevisionWrite, UpstreamChanges

from .factory import (
    RevisionRunConfig,
    asset_decorator,
    asset_kwargs,
    dataset_root,
)

Scorer = Callable[..., DataFrame]


@dataclass(frozen=True)
class Reference:
    """A reference input of a scoring asset, joined on ``on = {main column: reference column}``."""

    asset: dg.AssetsDefinition
    on: Mapping[str, str]


@dataclass(frozen=True)
class ScoringInputs:
    """What the scoring function sees: the main rows to score and the reference rows they need."""

    main: DataFrame
    references: dict[str, DataFrame]
    tombstones: DataFrame | None  # ids of deleted main entities (minor only)


def plan_inputs(
    window: DatasetSlice,
    main: UpstreamChanges,
    references: Mapping[str, tuple[UpstreamChanges, Mapping[str, str]]],
) -> ScoringInputs:
    """Select the main entities to (re)score and the reference rows they join to."""
    ids = list(main.id_columns)
    if window.is_major:
        rows = main.df.drop("_deleted") if main.changes.is_reset else main.state()
        tombstones = None
    else:
        # the change set already holds the touched entities' state at the pinned head
        rows = main.df.filter(~F.col("_deleted")).drop("_deleted")
        tombstones = main.df.filter(F.col("_deleted")).select(*ids)
        changed = [(ref, on) for ref, on in references.values() if ref.changes.revisions]
        if changed:
            # reverse join: main entities whose join keys match a changed reference row
            state = main.state()
            joined = reduce(
                DataFrame.unionByName,
                [
                    state.join(
                        F.broadcast(
                            ref.df.select(*[F.col(r).alias(m) for m, r in on.items()]).distinct()
                        ),
                        list(on),
                        "left_semi",
                    )
                    for ref, on in changed
                ],
            ).dropDuplicates(ids)
            rows = rows.unionByName(joined.join(rows.select(*ids), ids, "left_anti"))
    needed = {}
    for name, (ref, on) in references.items():
        keys = rows.select(*[F.col(m).alias(r) for m, r in on.items()]).distinct()
        ref_rows = ref.df.drop("_deleted") if ref.changes.is_reset else ref.state()
        needed[name] = ref_rows.join(F.broadcast(keys), list(on.values()), "left_semi")
    return ScoringInputs(rows, needed, tombstones)


def with_tombstones(scores: DataFrame, tombstones: DataFrame | None) -> DataFrame:
    """Scores flagged as live, plus a tombstone per deleted main entity."""
    if "_deleted" not in scores.columns:
        scores = scores.withColumn("_deleted", F.lit(False))
    if tombstones is None:
        return scores
    return scores.unionByName(
        tombstones.withColumn("_deleted", F.lit(True)), allowMissingColumns=True
    )


def scoring_asset(
    *,
    upstream: dg.AssetsDefinition,
    partitions_def: dg.TimeWindowPartitionsDefinition,
    code_version: str,
    references: Mapping[str, Reference] | None = None,
    id_columns: Sequence[str] | None = None,
    name: str | None = None,
    key_prefix: str | Sequence[str] | None = None,
    dataset: str | None = None,
    table: str | None = None,
    description: str | None = None,
    group_name: str | None = None,
    tags: Mapping[str, str] | None = None,
    owners: Sequence[str] | None = None,
    metadata: Mapping[str, Any] | None = None,
    io_manager_key: str = IO_MANAGER_KEY,
) -> Callable[[Scorer], dg.AssetsDefinition]:
    """Declare a scoring asset: ``fn(main_rows, **reference_rows) -> scores``.

    ``main_rows`` are the upstream rows (state at the pinned head) of the entities to
    (re)score: all of them on a major, on a minor those changed upstream or joined to
    a changed reference row. Scores are keyed by ``id_columns`` (default: the
    upstream's); entities deleted upstream get their score deleted.
    """
    references = dict(references or {})
    main_address = address_of(upstream)
    main_name = upstream.key.path[-1]
    if main_name in references:
        raise ValueError(f"reference name {main_name!r} is also the main input's name")

    def decorator(fn: Scorer) -> dg.AssetsDefinition:
        asset_name = name or fn.__name__
        address = TableAddress(
            dataset or asset_name,
            table or asset_name,
            tuple(id_columns or main_address.id_columns),
            "scoring",
        )
        consumer = json.dumps({"dataset": address.dataset, "table": address.table})
        refs = [
            UpstreamRef(
                upstream.key.to_user_string(), main_address.dataset, main_address.table, "main"
            )
        ]
        ins = {
            main_name: dg.AssetIn(
                upstream.key, metadata={META_READ: "changes", META_CONSUMER: consumer}
            )
        }
        for ref_name, ref in references.items():
            ref_address = address_of(ref.asset)
            refs.append(
                UpstreamRef(
                    ref.asset.key.to_user_string(),
                    ref_address.dataset,
                    ref_address.table,
                    "reference",
                )
            )
            ins[ref_name] = dg.AssetIn(
                ref.asset.key, metadata={META_READ: "changes", META_CONSUMER: consumer}
            )

        @asset_decorator(
            ins=ins,
            **asset_kwargs(
                name=asset_name,
                address=address,
                code_version=code_version,
                partitions_def=partitions_def,
                description=description or fn.__doc__,
                group_name=group_name,
                key_prefix=key_prefix,
                deps=(),
                tags=tags,
                owners=owners,
                metadata={META_UPSTREAM: upstream_refs_to_metadata(refs), **(metadata or {})},
                io_manager_key=io_manager_key,
            ),
        )
        def _scoring(
            context: dg.AssetExecutionContext, config: RevisionRunConfig, **inputs: UpstreamChanges
        ) -> dg.Output:
            window = resolve_slice(
                context,
                dataset_root(context, address),
                address,
                forced_by_config=config.force_major,
                monotonic=True,
            )
            resets = [u.asset_key for u in inputs.values() if u.changes.is_reset]
            if resets and not window.is_major:
                window = window.as_major(f"upstream reset in {', '.join(resets)}")
            plan = plan_inputs(
                window,
                inputs[main_name],
                {n: (inputs[n], r.on) for n, r in references.items()},
            )
            context.log.info(f"{'major' if window.is_major else 'minor'}: {window.reason}")
            scores = with_tombstones(fn(plan.main, **plan.references), plan.tombstones)
            return dg.Output(
                RevisionWrite(
                    window,
                    scores,
                    upstream=tuple(u.position for u in inputs.values()),
                    expected_positions={
                        (u.root, u.table): u.changes.since_sequence for u in inputs.values()
                    },
                )
            )

        return _scoring

    return decorator
