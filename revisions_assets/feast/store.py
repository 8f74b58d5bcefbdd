"""``RevisionsOfflineStore``: Feast's offline store over revisioned datasets, leak-free by
default, in this process (``DatasetReader``: Polars and its download cache, no JVM).

* ``get_historical_features``: each entity row gets every feature view's row as of its
  timestamp (``DatasetReader.as_of_join``), **as known at that timestamp**: a correction
  committed after the entity row's time never leaks into a training set. Feast's
  ``filter_by_created_timestamp=True`` asks for exactly that; everything committed, late
  corrections included, is the store's explicit ``known_at: all_committed``. A view's
  ``ttl`` counts from the time of the revision that wrote the row. Without entity rows
  (``start_date``, ``end_date``), the rows Feast's file store returns for that call: every
  entity of the views' tables as of ``end_date``, at ``end_date``, as known then.
* ``pull_latest_from_table_or_query`` / ``pull_all_from_table_or_query`` (``feast
  materialize``): the versions of the SCD2 history (``DatasetReader.history``) as known
  now; an entity is pulled when one of its versions starts in the window on either clock
  (its logical time, or the commit that wrote it: a late correction is pulled by the
  materialization that follows its commit), always with its current version, so the
  online store ends with the latest values (a deletion as nulls).
* ``pull_all_from_table_or_query`` also reads back a saved dataset
  (``SavedDatasetFileStorage``, the Parquet file ``persist`` wrote) as Feast's file store
  reads it: the one file the store reads that is not a ``RevisionsSource`` table.
* ``offline_write_batch`` is refused: a revisioned dataset is written by its producer's
  commits (a minor revision needs the engine, on Spark), not by the feature store. (Feast's
  ``write_to_offline_store`` checks the frame's columns against the source's before it
  calls the store: other columns fail there, with Feast's ``ValueError``.)
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from functools import partial
from pathlib import Path
from typing import Any, Literal

import pandas as pd
import polars as pl
import pyarrow as pa
import pyarrow.dataset as pads
import pyarrow.parquet as pq
from feast.data_format import ParquetFormat
from feast.data_source import DataSource
from feast.feature_logging import LoggingConfig, LoggingSource
from feast.feature_view import FeatureView
from feast.infra.offline_stores.file_source import FileSource, SavedDatasetFileStorage
from feast.infra.offline_stores.offline_store import (
    OfflineStore,
    RetrievalJob,
    RetrievalMetadata,
)
from feast.infra.offline_stores.offline_utils import (
    DEFAULT_ENTITY_DF_EVENT_TIMESTAMP_COL,
    infer_event_timestamp_from_entity_df,
)
from feast.infra.registry.base_registry import BaseRegistry
from feast.on_demand_feature_view import OnDemandFeatureView
from feast.repo_config import FeastConfigBaseModel, RepoConfig
from feast.saved_dataset import SavedDatasetStorage
from feast.utils import (
    _get_requested_feature_views_to_features_dict,
    _get_requested_on_demand_feature_views,
    compute_non_entity_date_range,
)
from pydantic import StrictStr

from ..core.columns import REVISION, REVISION_COLUMNS, VALID_FROM, VALID_TO
from ..core.errors import InvalidArgumentError, NoMajorRevisionError, ReadOnlyDatasetError
from ..core.read.plan.spans import ALL_COMMITTED, EVENT
from ..core.timeutil import to_utc
from .source import CREATED_TIMESTAMP, RevisionsSource

_UTC = pl.Datetime("us", "UTC")


class RevisionsOfflineStoreConfig(FeastConfigBaseModel):
    """The ``offline_store`` section of ``feature_store.yaml``.

    ``known_at``: what ``get_historical_features`` answers by default: ``event`` (as known
    at each entity row's timestamp: no leak) or ``all_committed`` (every revision committed
    so far, corrections made after the entity rows included). ``cache_dir``: where reads keep
    the files they fetch (an ``s3://`` dataset without one uses a temporary folder).
    ``storage_options``: as for ``DatasetReader`` (the S3 endpoint and credentials).
    """

    type: StrictStr = "revisions_assets.feast.RevisionsOfflineStore"
    known_at: Literal["event", "all_committed"] = EVENT
    cache_dir: StrictStr | None = None
    storage_options: dict[str, Any] | None = None


class RevisionsRetrievalJob(RetrievalJob):
    """A retrieval, computed when asked for (``to_df``, ``to_arrow``) as a Polars frame.

    ``repo_path``: the feature repository, from which ``persist`` takes a relative path."""

    def __init__(
        self,
        compute: Callable[[], pl.DataFrame],
        *,
        full_feature_names: bool = False,
        on_demand_feature_views: list[OnDemandFeatureView] | None = None,
        metadata: RetrievalMetadata | None = None,
        repo_path: Path | None = None,
    ):
        self._compute = compute
        self._full_feature_names = full_feature_names
        self._on_demand_feature_views = on_demand_feature_views or []
        self._metadata = metadata
        self._repo_path = repo_path

    @property
    def full_feature_names(self) -> bool:
        return self._full_feature_names

    @property
    def on_demand_feature_views(self) -> list[OnDemandFeatureView]:
        return self._on_demand_feature_views

    @property
    def metadata(self) -> RetrievalMetadata | None:
        return self._metadata

    def _to_df_internal(self, timeout: int | None = None) -> pd.DataFrame:
        return self._compute().to_pandas()

    def _to_arrow_internal(self, timeout: int | None = None) -> pa.Table:
        return self._compute().to_arrow()

    def persist(
        self,
        storage: SavedDatasetStorage,
        allow_overwrite: bool | None = False,
        timeout: int | None = None,
    ) -> None:
        """Write the retrieval as one Parquet file (a ``SavedDatasetFileStorage``; a relative
        path is taken from the feature repository, as Feast's file store takes it)."""
        if not isinstance(storage, SavedDatasetFileStorage):
            raise InvalidArgumentError(
                "RevisionsOfflineStore persists a retrieval to a SavedDatasetFileStorage (a "
                f"local Parquet path), got {type(storage).__name__}"
            )
        path = _saved_path(self._repo_path, storage.file_options.uri)
        if path.exists() and not allow_overwrite:
            raise InvalidArgumentError(f"{path} exists; pass allow_overwrite=True to replace it")
        path.parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(self.to_arrow(), path)


class RevisionsOfflineStore(OfflineStore):
    """Feast's offline store for ``RevisionsSource`` tables (see the module doc)."""

    supports_filter_by_created_timestamp = True

    @staticmethod
    def get_historical_features(
        config: RepoConfig,
        feature_views: list[FeatureView],
        feature_refs: list[str],
        entity_df: pd.DataFrame | str | None,
        registry: BaseRegistry,
        project: str,
        full_feature_names: bool = False,
        **kwargs: Any,
    ) -> RetrievalJob:
        """Each entity row with the features as of its timestamp, as known then (unless the
        store's ``known_at`` is ``all_committed`` and ``filter_by_created_timestamp`` is not
        given); the rows in the entity frame's order. Without entity rows (``start_date``,
        ``end_date`` given to Feast), every entity of the views' tables as of ``end_date``
        (``_tables_as_of``)."""
        known_at = EVENT if kwargs.get("filter_by_created_timestamp") else _known_at(config)
        odfvs = _get_requested_on_demand_feature_views(feature_refs, project, registry)
        views, _ = _get_requested_feature_views_to_features_dict(feature_refs, feature_views, odfvs)
        if entity_df is None:  # Feast's own defaults: end_date now, start_date end - max ttl
            start, end = compute_non_entity_date_range(
                feature_views, start_date=kwargs.get("start_date"), end_date=kwargs.get("end_date")
            )
            end = to_utc(end, "end_date")
            keys = _shared_join_keys(views)
            compute = partial(_tables_as_of, config, views, keys, end, known_at, full_feature_names)
            metadata = RetrievalMetadata(
                features=feature_refs, keys=keys, min_event_timestamp=start, max_event_timestamp=end
            )
        elif isinstance(entity_df, pd.DataFrame):
            compute, metadata = _entity_rows_job(
                config, views, feature_refs, entity_df, known_at, full_feature_names
            )
        else:
            raise InvalidArgumentError(
                "RevisionsOfflineStore.get_historical_features takes the entity rows as a "
                "pandas DataFrame (join keys and a timestamp column), or none (start_date and "
                f"end_date instead), got {type(entity_df)}"
            )
        return RevisionsRetrievalJob(
            compute,
            full_feature_names=full_feature_names,
            on_demand_feature_views=OnDemandFeatureView.get_requested_odfvs(
                feature_refs, project, registry
            ),
            metadata=metadata,
            repo_path=config.repo_path,
        )

    @staticmethod
    def pull_latest_from_table_or_query(
        config: RepoConfig,
        data_source: DataSource,
        join_key_columns: list[str],
        feature_name_columns: list[str],
        timestamp_field: str,
        created_timestamp_column: str | None,
        start_date: datetime | None = None,
        end_date: datetime | None = None,
    ) -> RetrievalJob:
        """The current version (as of ``end_date``, as known now) of every entity with a
        version starting in the window on either clock (a deletion as nulls)."""
        names = (join_key_columns, feature_name_columns, timestamp_field, created_timestamp_column)
        return RevisionsRetrievalJob(
            lambda: _pulled(config, data_source, *names, start_date, end_date, latest=True)
        )

    @staticmethod
    def pull_all_from_table_or_query(
        config: RepoConfig,
        data_source: DataSource,
        join_key_columns: list[str],
        feature_name_columns: list[str],
        timestamp_field: str,
        created_timestamp_column: str | None = None,
        start_date: datetime | None = None,
        end_date: datetime | None = None,
    ) -> RetrievalJob:
        """Every version starting in the window on either clock, plus the current version of
        each entity they belong to: keeping the latest per entity (what ``feast
        materialize`` does) gives the current values. Also how Feast reads back a saved
        dataset (``get_saved_dataset``): its file's rows in the window (``_saved_rows``)."""
        if _is_saved_dataset(data_source):
            saved = (join_key_columns, feature_name_columns, timestamp_field)
            return RevisionsRetrievalJob(
                lambda: _saved_rows(config, data_source, *saved, start_date, end_date)
            )
        names = (join_key_columns, feature_name_columns, timestamp_field, created_timestamp_column)
        return RevisionsRetrievalJob(
            lambda: _pulled(config, data_source, *names, start_date, end_date, latest=False)
        )

    @staticmethod
    def offline_write_batch(
        config: RepoConfig,
        feature_view: FeatureView,
        table: pa.Table,
        progress: Callable[[int], Any] | None,
    ) -> None:
        """Refused: a revisioned dataset is written by its producer's commits."""
        source = feature_view.batch_source
        where = (
            f" ({source.path}, table {source.table!r})"
            if isinstance(source, RevisionsSource)
            else ""
        )
        raise ReadOnlyDatasetError(
            f"feature view {feature_view.name!r}: RevisionsOfflineStore does not write to its "
            f"revisioned dataset{where}: a revision is committed by the dataset's producer "
            "(RevisionedDataset.commit, or its Dagster asset), never by the feature store. "
            "Set offline=False on the feature view, or push the rows to the producer"
        )

    @staticmethod
    def write_logged_features(
        config: RepoConfig,
        data: pa.Table | Path,
        source: LoggingSource,
        logging_config: LoggingConfig,
        registry: BaseRegistry,
    ) -> None:
        raise ReadOnlyDatasetError(
            "RevisionsOfflineStore does not store logged features: log them to a file "
            "destination of another offline store"
        )


def _known_at(config: RepoConfig) -> str:
    store = config.offline_store
    return ALL_COMMITTED if getattr(store, "known_at", EVENT) == ALL_COMMITTED else EVENT


def _entity_rows_job(
    config: RepoConfig,
    views: dict[FeatureView, list[str]],
    feature_refs: list[str],
    entity_df: pd.DataFrame,
    known_at: str,
    full_feature_names: bool,
) -> tuple[Callable[[], pl.DataFrame], RetrievalMetadata]:
    """The retrieval of ``entity_df``'s rows and its metadata. A timestamp column without
    a time zone is read as UTC, as Feast reads it (``coerce_tz_aware``)."""
    event_time = infer_event_timestamp_from_entity_df(dict(entity_df.dtypes))
    times = pd.to_datetime(entity_df[event_time], utc=True)

    def compute() -> pl.DataFrame:
        frame = pl.from_pandas(entity_df)
        stamp = frame.schema[event_time]
        if isinstance(stamp, pl.Datetime) and stamp.time_zone is None:
            frame = frame.with_columns(pl.col(event_time).dt.replace_time_zone("UTC"))
        for view, features in views.items():
            frame = _join_view(
                config, view, features, frame, event_time, known_at, full_feature_names
            )
        return frame  # in the entity rows' order, as the reader's joins keep it

    metadata = RetrievalMetadata(
        features=feature_refs,
        keys=[c for c in entity_df.columns if c != event_time],
        min_event_timestamp=times.min() if len(times) else None,
        max_event_timestamp=times.max() if len(times) else None,
    )
    return compute, metadata


def _join_keys(view: FeatureView) -> dict[str, str]:
    """``{id column of the view's table: the join key it is named in a retrieval}``."""
    return {e.name: view.projection.join_key_map.get(e.name, e.name) for e in view.entity_columns}


def _shared_join_keys(views: dict[FeatureView, list[str]]) -> list[str]:
    """The join keys every view has, which a retrieval without entity rows joins them on;
    views with different keys are refused (they need entity rows naming both)."""
    for view in views:
        _source_of(view)  # refused before the keys are compared
    keyed = {view.name: list(_join_keys(view).values()) for view in views}
    first, *others = keyed.values()
    if any(sorted(keys) != sorted(first) for keys in others):
        raise InvalidArgumentError(
            "get_historical_features without entity rows joins the feature views on their "
            f"join keys, and these views have different ones: {keyed}; pass entity rows "
            "(entity_df) with every join key instead, or retrieve the views one at a time"
        )
    return first


def _tables_as_of(
    config: RepoConfig,
    views: dict[FeatureView, list[str]],
    keys: list[str],
    end: datetime,
    known_at: str,
    full_feature_names: bool,
) -> pl.DataFrame:
    """What Feast's file store returns without entity rows: one row per entity at ``end``
    (``event_timestamp``), with every view's features as of ``end``. Here a view's rows are
    its table's state as of ``end``, as known then (``known_at="event"``) or with
    everything committed: an entity deleted by then has no row, and a ``ttl`` leaves out
    the rows written by a revision older than ``end - ttl``. The views' rows are joined on
    ``keys`` (a view without an entity's row leaves its features null)."""
    known = None if known_at == ALL_COMMITTED else end
    merged: pl.DataFrame | None = None
    for view, features in views.items():
        source = _source_of(view)
        reader = source.reader(config)
        columns = {f: _source_column(source, f) for f in features}
        wanted = list(dict.fromkeys(columns.values()))
        try:
            state = reader.read(
                source.table, as_of=end, known_at=known, columns=wanted, with_revision=True
            )
        except NoMajorRevisionError:  # no state yet (as known then): no entity
            schema = reader.tables()[source.table].schema
            state = pl.DataFrame(schema={c: schema[c] for c in [*_join_keys(view), *wanted]})
            state = state.with_columns(pl.lit(None, dtype=_UTC).alias(REVISION_COLUMNS[1]))
        if view.ttl and view.ttl > timedelta(0):
            state = state.filter(pl.col(REVISION_COLUMNS[1]) >= end - view.ttl)
        prefix = f"{view.projection.name_to_use()}__" if full_feature_names else ""
        rows = state.select(
            *[pl.col(i).alias(k) for i, k in _join_keys(view).items()],
            *[pl.col(c).alias(prefix + f) for f, c in columns.items()],
        )
        merged = rows if merged is None else merged.join(rows, on=keys, how="full", coalesce=True)
    assert merged is not None  # Feast asks for at least one feature
    stamp = pl.lit(end, dtype=_UTC).alias(DEFAULT_ENTITY_DF_EVENT_TIMESTAMP_COL)
    return merged.sort(keys).select(stamp, pl.all())


def _source_of(view: FeatureView) -> RevisionsSource:
    """The view's source, a ``RevisionsSource`` (and the view has entities)."""
    source = view.batch_source
    if not isinstance(source, RevisionsSource):
        raise InvalidArgumentError(
            f"feature view {view.name!r} reads {type(source).__name__} {source.name!r}; "
            "RevisionsOfflineStore reads RevisionsSource tables only"
        )
    if not view.entity_columns:
        raise InvalidArgumentError(
            f"feature view {view.name!r} has no entities: give it the entities whose join "
            f"keys are the id columns of table {source.table!r}"
        )
    return source


def _join_view(
    config: RepoConfig,
    view: FeatureView,
    features: list[str],
    frame: pl.DataFrame,
    event_time: str,
    known_at: str,
    full_feature_names: bool,
) -> pl.DataFrame:
    """``frame`` with ``features`` of ``view`` as of each row's ``event_time``."""
    source = _source_of(view)
    reader = source.reader(config)
    columns = {f: _source_column(source, f) for f in features}
    on = {key: column for column, key in _join_keys(view).items()}
    joined = reader.as_of_join(
        frame,
        source.table,
        event_time=event_time,
        on=on,
        known_at=known_at,
        columns=list(dict.fromkeys(columns.values())),
    )
    prefix = f"{view.projection.name_to_use()}__" if full_feature_names else ""
    values = {f: pl.col(c) for f, c in columns.items()}
    if view.ttl and view.ttl > timedelta(0):  # the row's revision is older than the ttl: none
        stamps = {r.name: r.timestamp for r in reader.revisions(source.table)}
        written = pl.col(REVISION).replace_strict(stamps, default=None, return_dtype=_UTC)
        fresh = written >= pl.col(event_time) - view.ttl
        values = {f: pl.when(fresh).then(v) for f, v in values.items()}
    added = [v.alias(prefix + f) for f, v in values.items()]
    return joined.select(*frame.columns, *added)


def _source_column(source: RevisionsSource, feature: str) -> str:
    """The table column behind ``feature`` (``field_mapping`` maps columns to features)."""
    reverse = {feature_name: column for column, feature_name in source.field_mapping.items()}
    return reverse.get(feature, feature)


def _pulled(
    config: RepoConfig,
    data_source: DataSource,
    join_key_columns: list[str],
    feature_name_columns: list[str],
    timestamp_field: str,
    created_timestamp_column: str | None,
    start: datetime | None,
    end: datetime | None,
    *,
    latest: bool,
) -> pl.DataFrame:
    """The versions a materialization pulls (see ``pull_all_from_table_or_query``)."""
    if not isinstance(data_source, RevisionsSource):
        raise InvalidArgumentError(
            f"RevisionsOfflineStore reads RevisionsSource tables only, got "
            f"{type(data_source).__name__} {data_source.name!r}"
        )
    reader = data_source.reader(config)
    table = data_source.table
    columns = list(dict.fromkeys(feature_name_columns))
    until = to_utc(end, "end_date") if end is not None else None
    history = reader.history(table, until=until, columns=columns)
    commits = {r.name: r.committed_at for r in reader.revisions(table)}
    history = history.with_columns(
        pl.col(REVISION).replace_strict(commits, return_dtype=_UTC).alias(CREATED_TIMESTAMP)
    )

    def within(column: str) -> pl.Expr:
        inside = pl.lit(True)
        if start is not None:
            inside = inside & (pl.col(column) >= to_utc(start, "start_date"))
        if end is not None:
            inside = inside & (pl.col(column) <= to_utc(end, "end_date"))
        return inside

    ids = list(join_key_columns)
    started = history.filter(within(VALID_FROM) | within(CREATED_TIMESTAMP))
    current = history.filter(pl.col(VALID_TO).is_null()).join(
        started.select(ids).unique(), on=ids, how="semi"
    )
    rows = current if latest else pl.concat([started, current]).unique(maintain_order=True)
    return rows.select(
        *ids,
        *columns,
        pl.col(VALID_FROM).alias(timestamp_field),
        pl.col(CREATED_TIMESTAMP).alias(created_timestamp_column or CREATED_TIMESTAMP),
    )


def _is_saved_dataset(source: DataSource) -> bool:
    """``source`` is a saved dataset's file, as Feast hands it to
    ``pull_all_from_table_or_query`` in ``get_saved_dataset``
    (``SavedDatasetFileStorage.to_data_source()``: a file source with a path and nothing
    else): the one file this store reads."""
    return (
        isinstance(source, FileSource)
        and source == SavedDatasetFileStorage.from_data_source(source).to_data_source()
    )


def _saved_path(repo_path: Path | None, uri: str) -> Path:
    """The local path of a saved dataset: a relative one is taken from the feature
    repository, as Feast's file store takes it (``FileSource.get_uri_for_file_path``)."""
    if "://" in uri:
        raise InvalidArgumentError(
            f"RevisionsOfflineStore keeps saved datasets at local paths, got {uri!r}: give "
            "SavedDatasetFileStorage a path (relative to the feature repository, or absolute)"
        )
    return Path(FileSource.get_uri_for_file_path(repo_path, uri))


def _saved_rows(
    config: RepoConfig,
    source: FileSource,
    join_key_columns: list[str],
    feature_name_columns: list[str],
    timestamp_field: str,
    start: datetime | None,
    end: datetime | None,
) -> pl.DataFrame:
    """A saved dataset's rows, read as Feast's file store reads them: its Parquet file (or
    folder of files), the rows whose ``timestamp_field`` is in ``[start, end]`` (a time
    without a zone is UTC), the join keys, the features and the timestamp."""
    if not isinstance(source.file_format, ParquetFormat):
        raise InvalidArgumentError(
            f"saved dataset {source.path!r} is stored as {type(source.file_format).__name__}; "
            "RevisionsOfflineStore reads saved datasets stored as Parquet"
        )
    path = _saved_path(config.repo_path, source.path)
    columns = list(dict.fromkeys([*join_key_columns, *feature_name_columns, timestamp_field]))
    files = pads.dataset(path, format="parquet")
    missing = [c for c in columns if c not in files.schema.names]
    if missing:
        raise InvalidArgumentError(
            f"saved dataset {str(path)!r} has no columns {missing}; its columns are "
            f"{files.schema.names}"
        )
    rows = pl.from_arrow(files.to_table(columns=columns))
    assert isinstance(rows, pl.DataFrame)
    stamp = rows.schema[timestamp_field]
    if isinstance(stamp, pl.Datetime) and stamp.time_zone is None:
        rows = rows.with_columns(pl.col(timestamp_field).dt.replace_time_zone("UTC"))
    if start is not None:
        rows = rows.filter(pl.col(timestamp_field) >= to_utc(start, "start_date"))
    if end is not None:
        rows = rows.filter(pl.col(timestamp_field) <= to_utc(end, "end_date"))
    return rows


__all__ = ["RevisionsOfflineStore", "RevisionsOfflineStoreConfig", "RevisionsRetrievalJob"]
