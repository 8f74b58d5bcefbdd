"""``RevisionsOfflineStore``: Feast's offline store over revisioned datasets, leak-free by
default, in this process (``DatasetReader``: Polars and its download cache, no JVM).

* ``get_historical_features``: each entity row gets every feature view's row as of its
  timestamp (``DatasetReader.as_of_join``), **as known at that timestamp**: a correction
  committed after the entity row's time never leaks into a training set. Feast's
  ``filter_by_created_timestamp=True`` asks for exactly that; everything committed, late
  corrections included, is the store's explicit ``known_at: all_committed``. A view's
  ``ttl`` counts from the time of the revision that wrote the row.
* ``pull_latest_from_table_or_query`` / ``pull_all_from_table_or_query`` (``feast
  materialize``): the versions of the SCD2 history (``DatasetReader.history``) as known
  now; an entity is pulled when one of its versions starts in the window on either clock
  (its logical time, or the commit that wrote it: a late correction is pulled by the
  materialization that follows its commit), always with its current version, so the
  online store ends with the latest values (a deletion as nulls).
* ``offline_write_batch`` is refused: a revisioned dataset is written by its producer's
  commits (a minor revision needs the engine, on Spark), not by the feature store.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, Literal

import pandas as pd
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
from feast.data_source import DataSource
from feast.feature_logging import LoggingConfig, LoggingSource
from feast.feature_view import FeatureView
from feast.infra.offline_stores.file_source import SavedDatasetFileStorage
from feast.infra.offline_stores.offline_store import (
    OfflineStore,
    RetrievalJob,
    RetrievalMetadata,
)
from feast.infra.offline_stores.offline_utils import infer_event_timestamp_from_entity_df
from feast.infra.registry.base_registry import BaseRegistry
from feast.on_demand_feature_view import OnDemandFeatureView
from feast.repo_config import FeastConfigBaseModel, RepoConfig
from feast.saved_dataset import SavedDatasetStorage
from feast.utils import (
    _get_requested_feature_views_to_features_dict,
    _get_requested_on_demand_feature_views,
)
from pydantic import StrictStr

from ..core.columns import REVISION, VALID_FROM, VALID_TO
from ..core.errors import InvalidArgumentError, ReadOnlyDatasetError
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
    """A retrieval, computed when asked for (``to_df``, ``to_arrow``) as a Polars frame."""

    def __init__(
        self,
        compute: Callable[[], pl.DataFrame],
        *,
        full_feature_names: bool = False,
        on_demand_feature_views: list[OnDemandFeatureView] | None = None,
        metadata: RetrievalMetadata | None = None,
    ):
        self._compute = compute
        self._full_feature_names = full_feature_names
        self._on_demand_feature_views = on_demand_feature_views or []
        self._metadata = metadata

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
        """Write the retrieval as one Parquet file (a ``SavedDatasetFileStorage``)."""
        if not isinstance(storage, SavedDatasetFileStorage):
            raise InvalidArgumentError(
                "RevisionsOfflineStore persists a retrieval to a SavedDatasetFileStorage (a "
                f"local Parquet path), got {type(storage).__name__}"
            )
        path = Path(storage.file_options.uri)
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
        given); the rows in the entity frame's order."""
        if not isinstance(entity_df, pd.DataFrame):
            raise InvalidArgumentError(
                "RevisionsOfflineStore.get_historical_features takes the entity rows as a "
                f"pandas DataFrame (join keys and a timestamp column), got {type(entity_df)}"
            )
        known_at = EVENT if kwargs.get("filter_by_created_timestamp") else _known_at(config)
        event_time = infer_event_timestamp_from_entity_df(dict(entity_df.dtypes))
        odfvs = _get_requested_on_demand_feature_views(feature_refs, project, registry)
        views, _ = _get_requested_feature_views_to_features_dict(feature_refs, feature_views, odfvs)
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

        return RevisionsRetrievalJob(
            compute,
            full_feature_names=full_feature_names,
            on_demand_feature_views=OnDemandFeatureView.get_requested_odfvs(
                feature_refs, project, registry
            ),
            metadata=RetrievalMetadata(
                features=feature_refs,
                keys=[c for c in entity_df.columns if c != event_time],
                min_event_timestamp=times.min() if len(times) else None,
                max_event_timestamp=times.max() if len(times) else None,
            ),
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
        materialize`` does) gives the current values."""
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


def _source_of(view: FeatureView) -> RevisionsSource:
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
    on = {view.projection.join_key_map.get(e.name, e.name): e.name for e in view.entity_columns}
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


__all__ = ["RevisionsOfflineStore", "RevisionsOfflineStoreConfig", "RevisionsRetrievalJob"]
