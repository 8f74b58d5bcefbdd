"""What the revision IO manager hands a scoring asset for each of its inputs."""

from dataclasses import dataclass

from revisions_assets.core.runs.consume import TableChanges
from revisions_assets.core.runs.run_slice import InputSlice


@dataclass(frozen=True)
class UpstreamChanges(TableChanges):
    """One upstream table as a consumer sees it: the changes since its position, pinned
    (``TableChanges``), and the run's slice of that input."""

    slice: InputSlice
