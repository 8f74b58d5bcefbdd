"""What the revision IO manager hands a scoring asset for each of its inputs."""

from dataclasses import dataclass
from functools import cached_property

from pyspark.sql import DataFrame

from revisions_assets import ChangeSet, RevisionedDataset

from .slice import UpstreamSlice


@dataclass(frozen=True)
class UpstreamChanges:
    """One upstream table as a consumer sees it: the changes since its position, pinned."""

    slice: UpstreamSlice
    changes: ChangeSet
    dataset: RevisionedDataset

    @property
    def df(self) -> DataFrame:
        """The changed entities at the pinned head, with ``_deleted`` (all of them on a reset)."""
        return self.changes.df

    @property
    def id_columns(self) -> tuple[str, ...]:
        return self.slice.ref.id_columns

    @cached_property
    def changed(self) -> DataFrame:
        """The entities whose values changed since the consumer's position, with
        ``_deleted``: the change set, or on a reset its soft-major ``changed``.

        A soft major's ``changed`` (after a carrying upstream major: that major's own rows;
        else a join of two whole states) is read several times by a
        scoring run (the rows to score, the tombstones, the count it reports): it is
        computed once and kept by the executors (``localCheckpoint``)."""
        changed = self.changes.changed if self.changes.is_reset else None
        return changed.localCheckpoint() if changed is not None else self.changes.df

    def state(self) -> DataFrame:
        """The table's full state at the pinned head (for majors and reverse joins)."""
        return self.dataset.read(self.slice.ref.table, at=self.slice.head)
