"""Scoring assets: a PySpark function over the changes of upstream revisioned tables.

Exactly-once (docs/concepts/consumers.md): each input is read as the changes since the position
recorded in this asset's own last revision, pinned to the upstream head when
the IO manager resolves the run's slice; the commit records the pinned heads as
the new positions and is guarded by the positions it started from (a
concurrent duplicate gets ConsumerPositionConflictError, a failed run commits
nothing).

Partitions: a scoring revision materializes the partitions of the upstream
revisions it consumed (``resources.slice.plan_consumer``), so the partition bar
shows every scored day. A run asked for other partitions fails before reading
anything (ScoringRangeError: it names the range to run), except that it may
re-include days already scored; a run with nothing to consume commits and
materializes nothing.

Reference inputs (reverse join): a changed reference row re-scores exactly
the main entities that join to it. Only the reference rows those entities
need are read (a semi-join against a broadcast of their keys: a filtered join
planned by Spark, nothing is collected).

Soft majors: a major due only to an upstream reset (this asset's code version
unchanged, ``RunSlice.soft``) re-scores only the upstream's
``ChangeSet.changed`` (and the entities joined to changed reference rows) and is
committed as a carrying major (``carry=True``): its rows are those scores plus a
tombstone per entity deleted upstream, and every other entity keeps its score
from the state the major carries (nothing is re-read or rewritten).
"""

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import dagster as dg
from pyspark.sql import DataFrame

from revisions_assets.core.columns import DELETED
from revisions_assets.core.errors import InvalidArgumentError, RevisionsError
from revisions_assets.core.runs.consume import plan_inputs, with_tombstones
from revisions_assets.core.runs.run_slice import RunSlice

from .factory import (
    AssetOptions,
    RevisionRunConfig,
    asset_decorator,
    asset_kwargs,
    declared_columns,
    io_manager,
)
from .pipes import Launcher, remote_asset
from .resources.address import (
    META_REMOTE,
    META_UPSTREAM,
    META_USES_COLUMNS,
    Role,
    TableAddress,
    UpstreamRef,
    address_of,
    upstream_refs_metadata,
)
from .resources.io_manager import RevisionsIOManager
from .resources.metadata import COLUMN_LINEAGE, column_lineage
from .resources.values import UpstreamChanges
from .source_version import SourceVersion, code_version_of
from .unmaterialized import scoring_slice_or_none

Scorer = Callable[..., DataFrame]


class ScoringInputsError(RevisionsError, ValueError):
    """A scoring asset declared with inputs that cannot be told apart."""


@dataclass(frozen=True)
class Reference:
    """A reference input of a scoring asset, joined on ``on = {main column: reference column}``."""

    asset: dg.AssetsDefinition
    on: Mapping[str, str]


def scoring_asset(
    *,
    upstream: dg.AssetsDefinition,
    partitions_def: dg.TimeWindowPartitionsDefinition,
    code_version: str | SourceVersion,
    references: Mapping[str, Reference] | None = None,
    id_columns: Sequence[str] | None = None,
    name: str | None = None,
    dataset: str | None = None,
    table: str | None = None,
    uses_columns: Sequence[str] | None = None,
    pipes: bool = False,
    options: AssetOptions | None = None,
    **asset_options: Any,
) -> Callable[[Scorer | Launcher], dg.AssetsDefinition]:
    """Declare a scoring asset: ``fn(main_rows, **reference_rows) -> scores``.

    ``main_rows`` are the upstream rows (state at the pinned head) of the entities to
    (re)score: all of them on a major, on a minor those changed upstream or joined to
    a changed reference row. Scores are keyed by ``id_columns`` (default: the
    upstream's); entities deleted upstream get their score deleted.

    ``uses_columns``: the main input's value columns ``fn`` reads (default: all). Only
    changes of those count: a minor re-scores the entities whose used values changed, and
    an upstream major that changed none of them (a bump of fields this scorer does not
    read) is a soft major that re-scores nothing and keeps the previous scores.

    Every materialization carries ``dagster/column_lineage``: each score column may derive
    from the main input's ``uses_columns`` and join columns, the references' join columns and
    a reference column of the same name (``resources.metadata.column_lineage``); with
    ``columns`` declared, the definition carries it too. ``options`` (or its keyword
    arguments) as in ``featurized_asset``, but ``deps``: a scoring asset depends on its
    inputs.

    ``pipes=True``: the scoring runs in a remote job launched with Dagster Pipes, as in
    ``featurized_asset``: ``fn(context, job, **clients)``; the job reads its inputs with
    ``job.scoring_inputs(spark)`` (see ``revisions_assets.pipes``). A run with nothing to
    consume launches nothing.
    """
    opts = AssetOptions.merged(options, asset_options, "scoring_asset")
    if opts.deps:
        raise InvalidArgumentError(
            "scoring_asset takes no deps: it depends on its upstream and its references"
        )
    columns = opts.columns
    references = dict(references or {})
    main_address = address_of(upstream)
    main_name = upstream.key.path[-1]
    if main_name in references:
        raise ScoringInputsError(
            f"reference name {main_name!r} is also the main input's name; rename the reference"
        )

    def decorator(fn: Scorer | Launcher) -> dg.AssetsDefinition:
        asset_name = name or fn.__name__
        address = TableAddress(
            dataset or asset_name,
            table or asset_name,
            tuple(id_columns or main_address.id_columns),
        )
        sources = {main_name: upstream, **{n: r.asset for n, r in references.items()}}
        joins = {n: r.on for n, r in references.items()}
        refs = [_ref(n, a, joins.get(n)) for n, a in sources.items()]
        lineage = _Lineage(upstream, main_name, references, address.id_columns, uses_columns)
        declared = (
            lineage.of(list(columns), {n: declared_columns(a) for n, a in sources.items()})
            if columns
            else {}
        )
        kwargs = asset_kwargs(
            name=asset_name,
            address=address,
            role=Role.SCORING,
            code_version=code_version_of(code_version, fn),
            partitions_def=partitions_def,
            default_description=fn.__doc__,
            metadata={
                META_UPSTREAM: upstream_refs_metadata(refs),
                **({META_USES_COLUMNS: ",".join(uses_columns)} if uses_columns else {}),
                **({META_REMOTE: "pipes"} if pipes else {}),
                **declared,
            },
            # a remote job reads the inputs itself: they are dependencies, not loaded here
            options=replace(opts, deps=[a.key for a in sources.values()]) if pipes else opts,
        )
        if pipes:
            return remote_asset(
                kwargs,
                fn,
                opts.io_manager_key,
                scoring=True,
                describe_output=lambda io, s: lineage.recorded(io, s, address, sources),
            )
        ins = {n: dg.AssetIn(a.key) for n, a in sources.items()}
        return _in_process(kwargs, ins, fn, opts.io_manager_key, lineage)

    return decorator


@dataclass(frozen=True)
class _Lineage:
    """The inputs of a scoring asset, and the ``dagster/column_lineage`` of its output: which
    input columns each output column may derive from (``resources.metadata.column_lineage``)."""

    main: dg.AssetsDefinition
    main_name: str
    references: Mapping[str, Reference]
    id_columns: tuple[str, ...]  # the output's
    uses_columns: Sequence[str] | None

    def of(self, output: Sequence[str], inputs: Mapping[str, Sequence[str]]) -> dict[str, Any]:
        """The lineage of ``output`` columns, from the inputs' columns."""
        ids = address_of(self.main).id_columns
        main = inputs[self.main_name]
        used = self.uses_columns or [c for c in main if c not in ids]
        return {
            COLUMN_LINEAGE: column_lineage(
                output,
                self.id_columns,
                (self.main.key, ids, [c for c in used if c != DELETED], main),
                [(r.asset.key, r.on, inputs[n]) for n, r in self.references.items()],
            )
        }

    def recorded(
        self,
        io: RevisionsIOManager,
        s: RunSlice,
        address: TableAddress,
        sources: Mapping[str, dg.AssetsDefinition],
    ) -> dict[str, Any]:
        """The lineage of what a remote job committed, from the schemas the run's snapshots
        of the logs record."""
        inputs = {
            n: [*_recorded_columns(io, s.run_id, address_of(a)), DELETED]
            for n, a in sources.items()
        }
        return self.of(_recorded_columns(io, s.run_id, address), inputs)


def _in_process(
    kwargs: Mapping[str, Any],
    ins: Mapping[str, dg.AssetIn],
    fn: Scorer,
    io_manager_key: str,
    lineage: _Lineage,
) -> dg.AssetsDefinition:
    """The asset of a scoring function run in this process: it plans its inputs (the main
    entities to re-score, the reference rows they join to), scores them, and commits."""

    @asset_decorator(
        ins=ins,
        # a run with nothing to consume materializes nothing (no day looks scored twice)
        output_required=False,
        **kwargs,
    )
    def _scoring(
        context: dg.AssetExecutionContext,
        config: RevisionRunConfig,  # force_major: read by the IO manager's resolver
        **inputs: UpstreamChanges,
    ) -> Iterator[dg.MaterializeResult]:
        io = io_manager(context, io_manager_key)
        s = scoring_slice_or_none(context, io)
        if s is None:
            return
        references = lineage.references
        plan = plan_inputs(
            s.is_major,
            s.soft,
            inputs[lineage.main_name],
            {n: (inputs[n], r.on) for n, r in references.items()},
        )
        context.log.info(f"{'major' if s.is_major else 'minor'}: {s.reason}")
        scores = fn(plan.main, **plan.references)
        output = with_tombstones(scores, plan.tombstones)
        shown = lineage.of(output.columns, {n: u.df.columns for n, u in inputs.items()})
        if s.soft:
            # a carrying major (the IO manager commits it with carry=True): the scores of
            # every entity not re-scored or deleted upstream are kept, not rewritten
            rescored = plan.main.count()  # one small job: the soft major's point
            context.log.info(f"soft major: re-scored {rescored} changed entities")
            shown["rescored_entities"] = rescored
        yield io.materialize(context, output, shown)

    return _scoring


def _recorded_columns(io: RevisionsIOManager, run_id: str, address: TableAddress) -> list[str]:
    """A table's columns as the run's snapshot of its log records them (read without Spark)."""
    return io.snapshot(run_id, address.dataset).tables()[address.table].schema.fieldNames()


def _ref(input_name: str, asset: dg.AssetsDefinition, on: Mapping[str, str] | None) -> UpstreamRef:
    """An input as the scoring asset's metadata records it: the main input (no ``on``) or a
    reference joined on ``on``."""
    address = address_of(asset)
    return UpstreamRef(
        input_name,
        asset.key.to_user_string(),
        address.dataset,
        address.table,
        address.id_columns,
        "main" if on is None else "reference",
        dict(on or {}),
    )
