"""Where revisioned datasets live: one base URI, one dataset per name under it."""

import os
from pathlib import Path

import dagster as dg
from pydantic import Field

from revisions_assets.core.storage import open_storage


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

    def root_for(self, dataset: str) -> str:
        """The dataset root for a dataset name, normalized as the engine records it."""
        if "://" in dataset or os.path.isabs(dataset):
            root = dataset
        elif "://" in self.base_uri:
            root = f"{self.base_uri.rstrip('/')}/{dataset}"
        else:
            root = str(Path(self.base_uri) / dataset)
        return open_storage(root).uri
