"""Values exchanged between revisioned asset bodies and the revision IO manager."""

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pyspark.sql import DataFrame

from revisions_assets import ChangeSet, RevisionedDataset
from revisions_assets.core.records import UpstreamPosition

from .slice import DatasetSlice

#: input metadata: how an input is read ("state" by default, or "changes")
META_READ = "revisions/read"
#: input metadata (changes inputs): JSON {"dataset", "table"} of the consuming asset
META_CONSUMER = "revisions/consumer"


@dataclass(frozen=True)
class RevisionWrite:
    """An asset's output for the IO manager: one table's rows for one revision."""

    slice: DatasetSlice
    data: DataFrame  # may carry a boolean _deleted column (tombstones)
    upstream: tuple[UpstreamPosition, ...] = ()
    expected_positions: Mapping[tuple[str, str], int] = field(default_factory=dict)


@dataclass(frozen=True)
class UpstreamChanges:
    """A consumer's view of one upstream table: the changes since its position, pinned."""

    dataset: RevisionedDataset
    root: str
    table: str
    id_columns: tuple[str, ...]
    asset_key: str
    changes: ChangeSet

    @property
    def df(self) -> DataFrame:
        return self.changes.df

    @property
    def position(self) -> UpstreamPosition:
        """The position to record once these changes are processed: the pinned head."""
        return UpstreamPosition(self.root, self.table, self.changes.until_sequence)

    def state(self) -> DataFrame:
        """The table's full state at the pinned head (for majors and reverse joins)."""
        return self.dataset.read(self.table, at=self.changes.until_sequence)


def open_dataset(
    spark: Any, root: str, table: str, id_columns: tuple[str, ...]
) -> RevisionedDataset:
    """A dataset handle that declares only this table (others are not ours to touch)."""
    return RevisionedDataset(root, spark=spark, id_columns={table: list(id_columns)})
