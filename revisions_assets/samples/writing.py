"""How the engine writes the samples (needs the ``spark`` extra; run by the maintainers with
``python -m revisions_assets.samples``, which rewrites the copies in this folder).

``features`` is the notebook guide's worked example, written as the original library wrote
it and imported once (docs/guides/operating/import.md).
"""

from __future__ import annotations

import shutil
from datetime import datetime, timezone
from pathlib import Path
from tempfile import TemporaryDirectory

import pandas as pd
from pyspark.sql import SparkSession

from ..core.dataset import RevisionedDataset
from . import HERE, SAMPLES

DAYS = (0, 2, 4, 6)
FEATURIZERS = ("featurizer_A", "featurizer_B")
#: what the engine writes beside a dataset that the dataset does not need (Hadoop checksums)
NOT_SHIPPED = shutil.ignore_patterns(".*.crc")


def write_features(root: str | Path, spark: SparkSession) -> RevisionedDataset:
    """The guide's example at ``root``: ids ``day`` to ``day + 4`` in each revision, every
    other revision a major, from a dataset of the original layout."""
    with TemporaryDirectory() as tmp:
        old = Path(tmp)  # description.parquet + <revision>/<featurizer>/data.parquet
        for day in DAYS:
            for featurizer in FEATURIZERS:
                frame = pd.DataFrame({"id": range(day, day + 5), "day": day}).set_index("id")
                (old / f"revision_{day}" / featurizer).mkdir(parents=True)
                frame.to_parquet(old / f"revision_{day}" / featurizer / "data.parquet")
        stamps = [datetime(2020, 1, 1 + day, tzinfo=timezone.utc) for day in DAYS]
        pd.DataFrame(
            [(f"revision_{d}", t, d % 4 == 0, "") for d, t in zip(DAYS, stamps, strict=True)],
            columns=["name", "timestamp", "is_major", "version"],
        ).to_parquet(old / "description.parquet")
        return RevisionedDataset.import_legacy(old, root, spark=spark)


WRITERS = {"features": write_features}


def regenerate(spark: SparkSession) -> None:
    """Rewrite every shipped sample with the engine (new file names, the same rows)."""
    assert set(WRITERS) == set(SAMPLES), "each sample has its writer"
    for name, write in WRITERS.items():
        with TemporaryDirectory() as tmp:
            write(Path(tmp) / name, spark)
            shutil.rmtree(HERE / name, ignore_errors=True)
            shutil.copytree(Path(tmp) / name, HERE / name, ignore=NOT_SHIPPED)
