"""``RevisionsSource``: a table of a revisioned dataset as a Feast data source.

Both of Feast's clocks come from the log, so a user declares neither: a row's event
timestamp is when its version became valid in logical time (``valid_from``, the time of the
revision that wrote it, as the SCD2 history gives it) and its created timestamp is when that
revision was committed (``committed_at``). Types are read from the dataset: the table's
columns as ``DatasetReader`` gives them.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable

import polars as pl
from feast.data_source import DataSource
from feast.protos.feast.core.DataSource_pb2 import DataSource as DataSourceProto
from feast.repo_config import RepoConfig
from feast.value_type import ValueType

from ..core.arguments import check_text
from ..core.errors import UnknownTableError
from ..core.reader import DatasetReader

#: the event timestamp Feast sees: when a row's version became valid (logical time)
EVENT_TIMESTAMP = "valid_from"
#: the created timestamp Feast sees: when the revision that wrote the row was committed
CREATED_TIMESTAMP = "committed_at"

_VALUE_TYPES = {
    "Boolean": ValueType.BOOL,
    "Int8": ValueType.INT32,
    "Int16": ValueType.INT32,
    "Int32": ValueType.INT32,
    "Int64": ValueType.INT64,
    "Float32": ValueType.FLOAT,
    "Float64": ValueType.DOUBLE,
    "String": ValueType.STRING,
    "Binary": ValueType.BYTES,
    "Date": ValueType.UNIX_TIMESTAMP,
    "Datetime": ValueType.UNIX_TIMESTAMP,
    "Decimal": ValueType.DOUBLE,
}


def feast_value_type(name: str) -> ValueType:
    """The Feast value type of a column type as ``get_table_column_names_and_types`` names
    it (a Polars type's name; ``List(...)`` for arrays)."""
    if name.startswith("List(") and name.endswith(")"):
        inner = feast_value_type(name[len("List(") : -1])
        listed = ValueType.__members__.get(f"{inner.name}_LIST")
        return listed if listed is not None else ValueType.UNKNOWN
    return _VALUE_TYPES.get(name.split("(")[0], ValueType.UNKNOWN)


def _type_name(dtype: pl.DataType) -> str:
    if isinstance(dtype, pl.List):
        return f"List({_type_name(dtype.inner)})"
    return type(dtype).__name__


class RevisionsSource(DataSource):
    """A table of the revisioned dataset at ``path`` (local, relative to the feature repo,
    ``file://`` or ``s3://``) as a Feast batch source: event and created timestamps come
    from the log (``valid_from``, ``committed_at``), so none is declared. Read by
    ``RevisionsOfflineStore``, through ``DatasetReader`` (no JVM)."""

    def __init__(
        self,
        *,
        name: str,
        path: str,
        table: str,
        field_mapping: dict[str, str] | None = None,
        description: str = "",
        tags: dict[str, str] | None = None,
        owner: str = "",
    ):
        check_text(path, "path")
        check_text(table, "table")
        self.path = path
        self.table = table
        super().__init__(
            name=name,
            timestamp_field=EVENT_TIMESTAMP,
            created_timestamp_column=CREATED_TIMESTAMP,
            field_mapping=field_mapping,
            description=description,
            tags=tags,
            owner=owner,
        )

    def __hash__(self) -> int:
        return super().__hash__()

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, RevisionsSource)
            and super().__eq__(other)
            and (self.path, self.table) == (other.path, other.table)
        )

    def source_type(self) -> DataSourceProto.SourceType.ValueType:
        return DataSourceProto.CUSTOM_SOURCE

    @staticmethod
    def from_proto(data_source: DataSourceProto) -> RevisionsSource:
        options = json.loads(data_source.custom_options.configuration)
        return RevisionsSource(
            name=data_source.name,
            path=options["path"],
            table=options["table"],
            field_mapping=dict(data_source.field_mapping),
            description=data_source.description,
            tags=dict(data_source.tags),
            owner=data_source.owner,
        )

    def _to_proto_impl(self) -> DataSourceProto:
        proto = DataSourceProto(
            name=self.name,
            type=DataSourceProto.CUSTOM_SOURCE,
            data_source_class_type=f"{__package__}.RevisionsSource",
            field_mapping=self.field_mapping,
            custom_options=DataSourceProto.CustomSourceOptions(
                configuration=json.dumps({"path": self.path, "table": self.table}).encode()
            ),
            description=self.description,
            tags=self.tags,
            owner=self.owner,
        )
        proto.timestamp_field = self.timestamp_field
        proto.created_timestamp_column = self.created_timestamp_column
        return proto

    def root(self, config: RepoConfig) -> str:
        """The dataset's root: ``path``, a relative one taken from the feature repo."""
        if "://" in self.path or os.path.isabs(self.path) or config.repo_path is None:
            return self.path
        return str(config.repo_path / self.path)

    def reader(self, config: RepoConfig) -> DatasetReader:
        """A reader of the dataset, with the offline store's storage options and download
        cache."""
        store = config.offline_store
        return DatasetReader(
            self.root(config),
            storage_options=getattr(store, "storage_options", None),
            cache_dir=getattr(store, "cache_dir", None),
        )

    def validate(self, config: RepoConfig) -> None:
        """The dataset exists and has the table (``UnknownTableError`` names the others)."""
        self._schema(config)

    def _schema(self, config: RepoConfig) -> dict[str, pl.DataType]:
        reader = self.reader(config)
        tables = reader.tables()
        if self.table not in tables:
            raise UnknownTableError(
                f"RevisionsSource {self.name!r}: {reader.root} has no table {self.table!r}; "
                f"its tables are {sorted(tables)}"
            )
        return tables[self.table].schema

    @staticmethod
    def source_datatype_to_feast_value_type() -> Callable[[str], ValueType]:
        return feast_value_type

    def get_table_column_names_and_types(self, config: RepoConfig) -> Iterable[tuple[str, str]]:
        columns = [(name, _type_name(dtype)) for name, dtype in self._schema(config).items()]
        return [*columns, (EVENT_TIMESTAMP, "Datetime"), (CREATED_TIMESTAMP, "Datetime")]

    def get_table_query_string(self) -> str:
        return f"{self.path}#{self.table}"

    def __repr__(self) -> str:
        return f"RevisionsSource(name={self.name!r}, path={self.path!r}, table={self.table!r})"
