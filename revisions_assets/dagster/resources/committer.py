"""The committer: what an asset body computed becomes the run's revision.

Called by the asset body, not by Dagster: the data version of a materialization
(``<table>@<sequence>``, known once the revision is committed) can only be given to Dagster
in the body's MaterializeResult, never from ``handle_output`` (dagster#15584). It commits
with the engine's ``commit_run`` at the run's slice (its timestamp, version, positions and
precondition), the same call a remote job makes: a minor writes only the rows whose values
changed, a major is written as a carrying major where it can be, a scoring asset's soft
major with ``carry=True`` (its rows are the re-scored entities and tombstones; every other
score is kept). The snapshot its commit took becomes the run's snapshot of the log.
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import DataFrame

from revisions_assets.core.errors import RevisionsError
from revisions_assets.core.runs.commit import CommittedRun, commit_run
from revisions_assets.core.runs.run_slice import RunSlice

from .location import DatasetLocation
from .run_state import RunState


class UnexpectedOutputError(RevisionsError, TypeError):
    """An asset handed the revision IO manager something other than a Spark DataFrame."""


class NothingToConsumeError(RevisionsError):
    """A consumer returned output although its slice says there is nothing to consume."""


def commit(location: DatasetLocation, state: RunState, s: RunSlice, obj: Any) -> CommittedRun:
    """Commit ``obj`` (the Spark DataFrame the body returned) as the revision of slice ``s``;
    the run's snapshot of the log is then the one taken after the commit."""
    if not isinstance(obj, DataFrame):
        raise UnexpectedOutputError(
            f"asset {s.asset_key} returned {type(obj).__name__}; the revision IO manager "
            "stores Spark DataFrames"
        )
    if s.skip is not None:
        raise NothingToConsumeError(
            f"{s.asset_key}: {s.skip}; a consumer with nothing to consume returns no output"
        )
    ds = location.dataset(s.root, writes={s.table: s.id_columns})
    done = commit_run(ds, s, obj)
    if done.snapshot is not None:
        state.adopt(done.snapshot)
    return done
