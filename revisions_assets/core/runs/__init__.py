"""A run of a revisioned asset, wherever its Spark runs: its slice, the one model of it
(``RunSlice``) and the rules that resolve it from the logs (``resolve.py``, ``versions.py``),
its commit (``commit_run``), and what a scoring run reads and re-scores (``plan_inputs``). No
Dagster: the Dagster layer resolves slices and commits with these, and so does a remote job
or a job run by hand (``revisions_assets.pipes``)."""

from .commit import CommittedRun, DeclaredColumnsError, commit_run, run_revisions
from .consume import ScoringInputs, TableChanges, plan_inputs, with_tombstones
from .resolve import (
    InputState,
    RunTarget,
    UpstreamNotReadyError,
    consumer_timestamp,
    featurized_slice,
    input_state,
    log_head,
    major_window_end,
    scoring_slice,
)
from .run_slice import SLICE_EXTRA, InputSlice, RunSlice, RunSliceError, UnknownInputError
from .versions import decide_consumer_major, decide_major, version_change

__all__ = [
    "SLICE_EXTRA",
    "CommittedRun",
    "DeclaredColumnsError",
    "InputSlice",
    "InputState",
    "RunSlice",
    "RunSliceError",
    "RunTarget",
    "ScoringInputs",
    "TableChanges",
    "UnknownInputError",
    "UpstreamNotReadyError",
    "commit_run",
    "consumer_timestamp",
    "decide_consumer_major",
    "decide_major",
    "featurized_slice",
    "input_state",
    "log_head",
    "major_window_end",
    "plan_inputs",
    "run_revisions",
    "scoring_slice",
    "version_change",
    "with_tombstones",
]
