"""Where revisioned datasets live: one base URI, one dataset per name under it."""

import os
from pathlib import Path

import dagster as dg
from dagster_aws.s3 import S3Resource
from pydantic import Field

from revisions_assets.core.backends import configure_storage, open_storage


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

    def setup_for_execution(self, context: dg.InitResourceContext) -> None:
        self.configure_access()

    def configure_access(self) -> None:
        """Register the S3 resource's client for every dataset root under ``base_uri``."""
        if self.s3 is not None and self.base_uri.startswith(("s3://", "s3a://")):
            prefix = "s3://" + self.base_uri.split("://", 1)[1]
            configure_storage(prefix, client=self.s3.get_client())

    def root_for(self, dataset: str) -> str:
        """The dataset root for a dataset name, normalized as the engine records it."""
        if "://" in dataset or os.path.isabs(dataset):
            root = dataset
        elif "://" in self.base_uri:
            root = f"{self.base_uri.rstrip('/')}/{dataset}"
        else:
            root = str(Path(self.base_uri) / dataset)
        return open_storage(root).uri
