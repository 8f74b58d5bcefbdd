"""A run's slice resolved by hand, from the logs, for a job run without Dagster (a backfill
from a notebook): the one ``RunSlice``, resolved by the rules the Dagster layer resolves it
with (``core.runs.resolve``, ``core.runs.versions``), without partitions."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta

from ..core.arguments import check_bool, check_text
from ..core.dataset import DEFAULT_COMPACT_AFTER, RevisionedDataset
from ..core.errors import ArgumentTypeError, InvalidArgumentError
from ..core.log.records import Revision
from ..core.runs.resolve import (
    InputState,
    RunTarget,
    featurized_slice,
    input_state,
    log_head,
    scoring_slice,
)
from ..core.runs.run_slice import RunSlice, RunSliceError
from ..core.runs.versions import decide_consumer_major, decide_major
from ..core.timeutil import TimeLike, to_utc
from ..core.uris import describe


@dataclass(frozen=True)
class JobInput:
    """An input of a scoring job run by hand: a table of another dataset, consumed from the
    position this consumer recorded up to its current head."""

    name: str  # the scoring function's argument
    root: str
    table: str
    kind: str = "main"  # or "reference", joined on ``on``
    on: Mapping[str, str] = field(default_factory=dict)  # {main column: reference column}


def slice_by_hand(
    *,
    dataset_root: str,
    table: str,
    id_columns: Sequence[str],
    code_version: str,
    window: tuple[TimeLike, TimeLike] | None = None,
    upstream: Sequence[JobInput] = (),
    is_major: bool | None = None,
    lookback: timedelta = timedelta(0),
    field_versions: Mapping[str, str] | None = None,
    uses_columns: Sequence[str] | None = None,
    partition: str = "",
    asset_key: str = "",
    compact_after: int | None = DEFAULT_COMPACT_AFTER,
    force_compaction: bool = False,
    storage_options: Mapping[str, object] | None = None,
) -> RunSlice:
    """The slice of a featurized run over ``window = (start, end)`` or of a scoring run over
    ``upstream``, resolved from the logs by the rules the revision IO manager resolves a
    Dagster run's slice with (``revisions_assets.core.runs.resolve``).

    A featurized major recomputes every entity from the first partition's start: when the
    log says a major is due (first revision, a code or field version changed), the window
    must say so, so ``is_major=True`` is required then (RunSliceError otherwise); a major's
    window reaches at least the table's newest revision. The revision's timestamp is the
    window's end (a scoring run: its main input's newest revision's, never before its own
    newest).
    """
    check_text(dataset_root, "dataset_root")
    check_text(table, "table")
    check_text(code_version, "code_version")
    if isinstance(id_columns, str) or not id_columns:
        raise ArgumentTypeError(f"id_columns must be a list of columns, got {describe(id_columns)}")
    if (window is None) == (not upstream):
        raise InvalidArgumentError(
            "give window=(start, end) for a featurized job or upstream=[JobInput(...)] for a "
            "scoring job (exactly one of them)"
        )
    options = dict(storage_options or {})
    own = _open(dataset_root, options)
    records = tuple(own.revisions())
    history = [r for r in records if r.wrote(table)]
    head = history[-1] if history else None
    target = RunTarget(
        asset_key=asset_key,
        root=own.root,
        table=table,
        id_columns=tuple(id_columns),
        code_version=code_version,
        expected_head=log_head(records),
        partition=partition,
        compact_after=compact_after,
        force_compaction=check_bool(force_compaction, "force_compaction"),
    )
    if window is not None:
        start, end = (to_utc(t, "window") for t in window)
        due, why = decide_major(head, table, code_version, False, field_versions)
        if due and is_major is not True:
            raise RunSliceError(
                f"{table}: a major is due ({why}): a major recomputes every entity, so give "
                "a window from the first partition's start and is_major=True"
            )
        major = due or bool(is_major)
        reason = why if due else ("major given by hand" if major else why)
        return featurized_slice(
            target,
            history,
            (major, reason),
            (start, end),
            lookback=lookback,
            field_versions=field_versions,
        )
    if sum(1 for j in upstream if j.kind == "main") != 1:
        raise InvalidArgumentError("upstream needs exactly one JobInput of kind 'main'")
    inputs = [_input(j, records, table, options) for j in upstream]
    resets = [u.input.name for u in inputs if u.is_reset]
    decision = decide_consumer_major(head, table, code_version, bool(is_major), resets)
    main = next(u for u in inputs if u.input.kind == "main")
    return scoring_slice(
        target,
        history,
        decision,
        [u.input for u in inputs],
        main.newest_timestamp,
        uses_columns=uses_columns,
    )


def _open(root: str, options: Mapping[str, object]) -> RevisionedDataset:
    """A read-only handle on a dataset: its log, read without Spark."""
    return RevisionedDataset(root, read_only=True, storage_options=options)


def _input(
    job: JobInput, consumer: Sequence[Revision], consumer_table: str, options: dict[str, object]
) -> InputState:
    """Where the consumer stands in ``job``'s table, at the input's current head."""
    if job.kind not in ("main", "reference"):
        raise InvalidArgumentError(f"JobInput {job.name!r}: kind must be 'main' or 'reference'")
    ds = _open(job.root, options)
    return input_state(
        name=job.name,
        asset_key="",
        kind=job.kind,
        root=ds.root,
        table=job.table,
        records=ds.revisions(),
        consumer_records=consumer,
        consumer_table=consumer_table,
        on=job.on,
    )
