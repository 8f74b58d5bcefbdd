"""Where revisioned datasets live: one base URI, one dataset per name under it.

The location also hands out the logs and dataset handles a run or a sensor tick
needs, each opened once and cached on the resource (Dagster initializes resources
per run, so a cache lives as long as one run or one tick):

- ``read_log``: the committed revisions, read-only (sensors, checks, the resolver);
- ``read_view``: the same log with compactions and vacuums applied (checks, vacuum jobs);
- ``read_state``: a table's state as a Spark DataFrame, read-only (checks);
- ``dataset``: a full handle for the IO manager, which reads and commits.
"""

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import dagster as dg
from dagster_aws.s3 import S3Resource
from pydantic import Field, PrivateAttr
from pyspark.sql import DataFrame, SparkSession

from revisions_assets import RevisionedDataset
from revisions_assets.core.arguments import check_spark, check_text
from revisions_assets.core.dataset import DEFAULT_COMPACT_AFTER
from revisions_assets.core.errors import ArgumentTypeError, InvalidArgumentError
from revisions_assets.core.log.records import Revision
from revisions_assets.core.log.revision_log import RevisionLog
from revisions_assets.core.log.view import LogView
from revisions_assets.core.read.execute.spark import SparkExecutor
from revisions_assets.core.read.plan.requests import Snapshot, plan_state
from revisions_assets.core.storage.backends import configure_storage, open_storage
from revisions_assets.core.storage.base import check_relative
from revisions_assets.core.uris import describe


class DatasetLocation(dg.ConfigurableResource):
    """Maps an asset's dataset name to a dataset root URI.

    A dataset name that is itself a URI (``s3://…``, ``file://…``) or an absolute
    path is used as is; otherwise it is placed under ``base_uri``.
    """

    base_uri: str = Field(
        description=(
            "Base location of the datasets: a local directory (relative paths are resolved "
            "against the working directory of the process), file://… or s3://bucket/prefix."
        )
    )

    s3: S3Resource | None = Field(
        default=None,
        description=(
            "dagster-aws S3 resource whose client reads and commits the logs of datasets under "
            "an s3:// base_uri (endpoint, region, credentials). Unset: the standard AWS "
            "environment variables and credential chain."
        ),
    )

    compact_after: int | None = Field(
        default=DEFAULT_COMPACT_AFTER,
        description=(
            "Compact a table after a commit that leaves more than this many revisions on top "
            "of its base (its major or latest compaction); null: only when a run forces it. "
            "The compaction_due check warns past it."
        ),
    )

    _logs: dict[str, RevisionLog] = PrivateAttr(default_factory=dict)
    _datasets: dict[str, tuple[RevisionedDataset, dict[str, tuple[str, ...]]]] = PrivateAttr(
        default_factory=dict
    )

    def setup_for_execution(self, context: dg.InitResourceContext) -> None:
        self.configure_access()

    def configure_access(self) -> None:
        """Register the S3 resource's client for every dataset root under ``base_uri``."""
        if self.s3 is not None and self.base_uri.startswith(("s3://", "s3a://")):
            prefix = "s3://" + self.base_uri.split("://", 1)[1]
            configure_storage(prefix, client=self.s3.get_client())

    def root_for(self, dataset: str) -> str:
        """The dataset root for a dataset name, normalized as the engine records it; a
        relative name stays under ``base_uri`` (``..`` is refused: PathEscapeError)."""
        check_text(dataset, "dataset")
        if not dataset.strip():
            raise InvalidArgumentError(f"dataset must name a dataset, got {dataset!r}")
        if "://" in dataset or os.path.isabs(dataset):
            root = dataset
        elif "://" in self.base_uri:
            root = f"{self.base_uri.rstrip('/')}/{check_relative(dataset)}"
        else:
            root = str(Path(self.base_uri) / check_relative(dataset))
        return open_storage(root).uri

    def read_log(self, dataset: str) -> tuple[Revision, ...]:
        """The committed revisions of a dataset, read without Spark and without writing."""
        return self._log(dataset).refresh()

    def read_view(self, dataset: str) -> LogView:
        """The committed log with its maintenance entries applied (compactions, vacuums):
        what a read plans from, read without Spark and without writing."""
        log = self._log(dataset)
        log.refresh()
        return log.view()

    def read_state(self, spark: SparkSession, dataset: str, table: str) -> DataFrame:
        """A table's current state (docs/concepts/read-semantics.md), planned from the read-only
        log (on the newest
        compaction, like every default read)."""
        if check_spark(spark) is None:
            raise ArgumentTypeError("read_state needs a SparkSession, got None")
        check_text(table, "table")
        snapshot = Snapshot(self.root_for(dataset), self.read_view(dataset))
        storage = self._log(dataset).storage
        return SparkExecutor(storage, lambda: spark, "auto").merge(plan_state(snapshot, table).rows)

    def _log(self, dataset: str) -> RevisionLog:
        root = self.root_for(dataset)
        if root not in self._logs:
            self._logs[root] = RevisionLog(open_storage(root))
        return self._logs[root]

    def dataset(
        self,
        dataset: str,
        spark: SparkSession | None,
        writes: Mapping[str, Sequence[str]] | None = None,
    ) -> RevisionedDataset:
        """A handle that reads and commits, opened once per dataset; ``writes`` declares the
        tables (and their id columns) the caller commits, the only ones it may touch."""
        root = self.root_for(dataset)
        check_spark(spark)
        wanted = {t: tuple(ids) for t, ids in _declared_writes(writes).items()}
        cached = self._datasets.get(root)
        if cached is not None and wanted.items() <= cached[1].items():
            return cached[0]
        declared = {**(cached[1] if cached else {}), **wanted}
        handle = RevisionedDataset(
            root,
            spark=spark,
            id_columns=_declaration(declared),
            compact_after=self.compact_after,
        )
        self._datasets[root] = (handle, declared)
        return handle


def _declared_writes(writes: Any) -> Mapping[str, Sequence[str]]:
    """``writes`` checked: None, or {table: [id column, ...]} with strings only."""
    if writes is None:
        return {}
    if not isinstance(writes, Mapping):
        raise ArgumentTypeError(
            f"writes must be a dict {{table: [id columns]}}, got {describe(writes)}"
        )
    for table, ids in writes.items():
        check_text(table, "writes: table")
        if isinstance(ids, str) or not isinstance(ids, Sequence) or not ids:
            raise ArgumentTypeError(
                f"writes[{table!r}] must be a non-empty list of id columns, got {describe(ids)}"
            )
        for column in ids:
            check_text(column, f"writes[{table!r}]: id column")
    return writes


def _declaration(declared: Mapping[str, tuple[str, ...]]) -> Any:
    """No declared table: a read-only use; the engine then needs no id columns."""
    return {t: list(ids) for t, ids in declared.items()} or None
