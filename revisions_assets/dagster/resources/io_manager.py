"""The revision IO manager: every materialization is one revision of a revisioned dataset.

It stores and loads; the asset body computes (as Dagster's ``DbIOManager`` does). It holds
what a run needs and dispatches to one part per concern:

- ``resolver.py``: the run's context and the logs -> the run's one frozen ``RunSlice``
  (``slice_for``), once per run and asset;
- ``run_state.py``: the run's snapshot of each log, and its slices;
- ``loader.py``: ``load_input``, a scoring input's changes or a table's state;
- ``committer.py``: ``materialize``, called by the asset body with the DataFrame it
  computed, commits it at the slice;
- ``materialization.py``: the MaterializeResult of the commit, read from the log (the
  revision as metadata and data version, and every other partition it covers);
- ``handle_output`` only refuses outputs: a revisioned asset commits in its body.
"""

from collections.abc import Mapping
from typing import Any

import dagster as dg
from pydantic import Field, PrivateAttr
from pyspark.sql import DataFrame, SparkSession

from revisions_assets.core.errors import ArgumentTypeError
from revisions_assets.core.read.scan import DatasetSnapshot
from revisions_assets.core.runs.commit import CommittedRun
from revisions_assets.core.runs.run_slice import RunSlice
from revisions_assets.core.uris import describe

from .address import NotRevisionedAssetError
from .committer import UnexpectedOutputError, commit
from .loader import load_input
from .location import DatasetLocation
from .materialization import materialize_result
from .resolver import AnyContext, resolve_slice, step_asset_key, step_of
from .run_state import RunState
from .spark import SparkSessionResource
from .values import UpstreamChanges


class RevisionsIOManager(dg.ConfigurableIOManager):
    """Writes each materialization as a revision; loads inputs as Spark DataFrames."""

    location: dg.ResourceDependency[DatasetLocation] = Field(
        description="Where the datasets live (DatasetLocation)."
    )
    spark: dg.ResourceDependency[SparkSessionResource] = Field(
        description="The Spark session resource used for reads and writes."
    )
    _runs: dict[str, RunState] = PrivateAttr(default_factory=dict)

    def run_state(self, run_id: str) -> RunState:
        """The snapshots and slices of run ``run_id``."""
        if run_id not in self._runs:
            self._runs[run_id] = RunState(self.location)
        return self._runs[run_id]

    def snapshot(self, run_id: str, dataset: str, *, refresh: bool = False) -> DatasetSnapshot:
        """The run's snapshot of a dataset's log (``RunState.snapshot``): what the run's
        slice, inputs and checks read."""
        return self.run_state(run_id).snapshot(dataset, refresh=refresh)

    def session(self) -> SparkSession:
        """The run's Spark session, started with the Spark resource's settings: call it before
        reading data through the location's handles, which read with the process's session.
        Resolving a slice needs none (no JVM for a run its slice refuses)."""
        return self.spark.spark_session

    # -- the resolver ----------------------------------------------------------------------

    def slice_for(self, context: AnyContext) -> RunSlice:
        """The slice of the asset being materialized in this step, resolved once per run
        (``resolver.resolve_slice``); a refused run raises ``ScoringRangeError`` each time."""
        if not isinstance(context, AnyContext):
            raise ArgumentTypeError(
                "slice_for needs the asset's execution, input or output context, got "
                f"{describe(context)}"
            )
        step = step_of(context)
        key = context.asset_key if isinstance(context, dg.OutputContext) else None
        key = key or step_asset_key(step)
        if key is None:
            raise NotRevisionedAssetError(
                f"step {step.step.key} does not materialize exactly one asset"
            )
        state = self.run_state(step.run_id)
        return state.slice(
            key.to_user_string(), lambda: resolve_slice(step, key, self.location, state)
        )

    def current_state(self, s: RunSlice) -> DataFrame:
        """The slice's table at the log head the run started from (a reference minor commits
        only its difference)."""
        self.session()
        return self.snapshot(s.run_id, s.root).scan(s.table, at=s.expected_head).to_spark()

    # -- inputs and outputs ----------------------------------------------------------------

    def materialize(
        self,
        context: dg.AssetExecutionContext,
        obj: DataFrame,
        metadata: Mapping[str, Any] | None = None,
    ) -> dg.MaterializeResult:
        """Commit what the asset body returned as the run's revision (``committer.commit``)
        and return the body's MaterializeResult. ``metadata``: more entries (the body's)."""
        s = self.slice_for(context)
        done = commit(self.location, self.run_state(s.run_id), s, obj)
        return self.materialization(context, done, metadata)

    def materialization(
        self,
        context: dg.AssetExecutionContext,
        done: CommittedRun,
        metadata: Mapping[str, Any] | None = None,
    ) -> dg.MaterializeResult:
        """The MaterializeResult of the run's commit ``done``, made in process or by a remote
        job, read from the run's snapshot of its log after it (``materialization.py``)."""
        s = self.slice_for(context)
        return materialize_result(context, s, done, self.snapshot(s.run_id, s.root), metadata)

    def handle_output(self, context: dg.OutputContext, obj: Any) -> None:
        raise UnexpectedOutputError(
            f"asset {context.asset_key.to_user_string()} returned {type(obj).__name__} to the "
            "revision IO manager, which loads inputs only: a revisioned asset commits in its "
            "body (declare it with featurized_asset, scoring_asset or reference_asset)"
        )

    def load_input(self, context: dg.InputContext) -> DataFrame | UpstreamChanges | None:
        return load_input(self, context)
