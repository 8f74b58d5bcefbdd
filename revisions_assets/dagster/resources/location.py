"""Where revisioned datasets live: one base URI, one dataset per name under it.

The location hands out one ``RevisionedDataset`` handle per dataset, opened once and kept
on the resource (Dagster initializes resources per run, so a handle lives as long as one
run or one sensor tick): every read of the Dagster layer goes through it, the public reads
of the engine, so a run reads each log through one handle. A handle opened for reads is
read-only (sensors and checks never write); the revision IO manager asks for its own table
with ``writes`` and gets a handle that commits. Spark is the process's session: the run's
Spark resource builds it before anything reads data, and a handle opened for the logs alone
(a sensor, a Pipes orchestrator) never starts a JVM.

A relative ``base_uri`` is resolved against the project root (``project_root``), the one
rule the components' ``base_uri`` and ``revisions_resources(...)`` share.
"""

import os
import tomllib
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
from revisions_assets.core.storage.backends import configure_storage, open_storage
from revisions_assets.core.storage.base import check_relative
from revisions_assets.core.uris import describe


def project_root(start: Path | None = None) -> Path:
    """The folder a relative ``base_uri`` is resolved against: the nearest one, from ``start``
    (default: the working directory) up, whose ``pyproject.toml`` has a ``[tool.dg]`` table
    (the project root, as ``dg`` finds it); outside such a project, ``start`` itself."""
    here = (start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        pyproject = folder / "pyproject.toml"
        if pyproject.is_file():
            try:
                if "dg" in tomllib.loads(pyproject.read_text()).get("tool", {}):
                    return folder
            except (OSError, tomllib.TOMLDecodeError):
                continue
    return here


def resolve_base_uri(base_uri: str, root: Path | None = None) -> str:
    """``base_uri`` as a location: a URI or an absolute path as it is, a relative path under
    ``root`` (default: ``project_root()``)."""
    check_text(base_uri, "base_uri")
    if "://" in base_uri or os.path.isabs(base_uri):
        return base_uri
    return str((root or project_root()) / base_uri)


class DatasetLocation(dg.ConfigurableResource):
    """Maps an asset's dataset name to a dataset root URI.

    A dataset name that is itself a URI (``s3://…``, ``file://…``) or an absolute
    path is used as is; otherwise it is placed under ``base_uri``.
    """

    base_uri: str = Field(
        description=(
            "Base location of the datasets: a local directory, file://… or s3://bucket/prefix. "
            "A relative directory is resolved against the project root: the nearest folder, "
            "from the working directory up, whose pyproject.toml has a [tool.dg] table."
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

    #: one handle per dataset root, with the tables it may write (None: read-only)
    _datasets: dict[str, tuple[RevisionedDataset, dict[str, tuple[str, ...]] | None]] = PrivateAttr(
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
        else:
            base = resolve_base_uri(self.base_uri)
            if "://" in base:
                root = f"{base.rstrip('/')}/{check_relative(dataset)}"
            else:
                root = str(Path(base) / check_relative(dataset))
        return open_storage(root).uri

    def dataset(
        self,
        dataset: str,
        spark: SparkSession | None = None,
        writes: Mapping[str, Sequence[str]] | None = None,
    ) -> RevisionedDataset:
        """The dataset's handle, opened once. Read-only, unless ``writes`` declares the tables
        (and their id columns) the caller commits, the only ones it may touch (``{}``: none,
        for maintenance such as a vacuum). ``spark``: checked only; a handle reads with the
        process's session (see the module doc)."""
        root = self.root_for(dataset)
        check_spark(spark)
        wanted = (
            None
            if writes is None
            else {t: tuple(ids) for t, ids in _declared_writes(writes).items()}
        )
        cached = self._datasets.get(root)
        if cached is not None and (
            wanted is None or (cached[1] is not None and wanted.items() <= cached[1].items())
        ):
            return cached[0]
        declared = None if wanted is None else {**((cached and cached[1]) or {}), **wanted}
        handle = RevisionedDataset(
            root,
            id_columns={t: list(ids) for t, ids in declared.items()} if declared else None,
            compact_after=self.compact_after,
            read_only=declared is None,
        )
        self._datasets[root] = (handle, declared)
        return handle

    def read_log(self, dataset: str) -> tuple[Revision, ...]:
        """The committed revisions of a dataset, read without Spark and without writing."""
        return self.root_and_log(dataset)[1]

    def root_and_log(self, dataset: str) -> tuple[str, tuple[Revision, ...]]:
        """A dataset's root and its committed revisions (what the slice rules plan from)."""
        ds = self.dataset(dataset)
        return ds.root, tuple(ds.revisions())

    def read_state(self, spark: SparkSession, dataset: str, table: str) -> DataFrame:
        """A table's current state (docs/concepts/read-semantics.md): a scan of a fresh
        snapshot of the dataset's log, through its read-only handle (the file gate checks
        the files it reads)."""
        if check_spark(spark) is None:
            raise ArgumentTypeError("read_state needs a SparkSession, got None")
        check_text(table, "table")
        return self.dataset(dataset).snapshot().scan(table).to_spark()


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
