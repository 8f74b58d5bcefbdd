"""A run of a revisioned asset, wherever its Spark runs: its slice as plain data
(``RunSlice``), its commit (``commit_run``), what a scoring run reads and re-scores
(``plan_inputs``), and the major-or-minor rules. No Dagster: the Dagster layer resolves
slices and commits with these, and so does a remote job (``revisions_assets.pipes``)."""

from .commit import CommittedRun, DeclaredColumnsError, commit_run, run_revisions
from .consume import ScoringInputs, TableChanges, plan_inputs, with_tombstones
from .run_slice import SLICE_EXTRA, InputSlice, RunSlice, RunSliceError
from .versions import decide_consumer_major, decide_major, version_change

__all__ = [
    "SLICE_EXTRA",
    "CommittedRun",
    "DeclaredColumnsError",
    "InputSlice",
    "RunSlice",
    "RunSliceError",
    "ScoringInputs",
    "TableChanges",
    "commit_run",
    "decide_consumer_major",
    "decide_major",
    "plan_inputs",
    "run_revisions",
    "version_change",
    "with_tombstones",
]
