"""One run's view of the dataset logs: its snapshot of each log, and its slices.

Every read of a run is a scan of the run's one snapshot of a log: taken on the run's first
read of that log and kept, so that the run's slice, its inputs and its checks all read one
state of each log however many commits land meanwhile; replaced by the snapshot its own
commit took (``adopt``), which its checks and the assets after it in the run read. Each
asset's slice is resolved once a run and kept, and so is the refusal of one
(``ScoringRangeError``: the asset body and ``load_input`` both meet it).
"""

from __future__ import annotations

from collections.abc import Callable

from revisions_assets.core.log.records import Revision
from revisions_assets.core.read.scan import DatasetSnapshot
from revisions_assets.core.runs.run_slice import RunSlice

from .location import DatasetLocation
from .slice import ScoringRangeError


class RunState:
    """The snapshots and the slices of one run (``RevisionsIOManager`` keeps one per run)."""

    def __init__(self, location: DatasetLocation):
        self._location = location
        self._snapshots: dict[str, DatasetSnapshot] = {}
        self._slices: dict[str, RunSlice | ScoringRangeError] = {}

    def snapshot(self, dataset: str, *, refresh: bool = False) -> DatasetSnapshot:
        """The run's snapshot of a dataset's log (``dataset``: a name or a root), taken on its
        first read; ``refresh``: taken again (after a remote job's commit)."""
        ds = self._location.dataset(dataset)
        if refresh or ds.root not in self._snapshots:
            self._snapshots[ds.root] = ds.snapshot()
        return self._snapshots[ds.root]

    def adopt(self, snapshot: DatasetSnapshot) -> None:
        """The snapshot the run's own commit took: its log from then on."""
        self._snapshots[snapshot.root] = snapshot

    def log_of(self, dataset: str) -> tuple[str, tuple[Revision, ...]]:
        """A dataset's root and log on the run's snapshot (what the slice rules read)."""
        snapshot = self.snapshot(dataset)
        return snapshot.root, tuple(snapshot.revisions())

    def slice(self, asset_key: str, resolve: Callable[[], RunSlice]) -> RunSlice:
        """The asset's slice, resolved on the first call; its refusal raised on every call."""
        if asset_key not in self._slices:
            try:
                self._slices[asset_key] = resolve()
            except ScoringRangeError as refused:
                self._slices[asset_key] = refused
        found = self._slices[asset_key]
        if isinstance(found, ScoringRangeError):
            raise found
        return found
