"""Writing datasets in the original layout (UpdatableDataset) with pandas, as it did.

``description.parquet`` (name, timestamp, is_major, version) plus
``<revision>/<featurizer>/data.parquet``, each a pandas DataFrame whose index is the entity.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from pathlib import Path

import pandas as pd


def write_legacy(
    root: str | Path,
    revisions: Sequence[tuple[str, datetime, bool, str, Mapping[str, pd.DataFrame]]],
) -> None:
    """Write (name, timestamp, is_major, version, {featurizer: frame}) revisions, in order."""
    root = Path(root)
    for name, _, _, _, frames in revisions:
        for featurizer, frame in frames.items():
            path = root / name / featurizer / "data.parquet"
            path.parent.mkdir(parents=True, exist_ok=True)
            frame.to_parquet(path)
    description = pd.DataFrame(
        [(n, t, m, v) for n, t, m, v, _ in revisions],
        columns=["name", "timestamp", "is_major", "version"],
    )
    description.to_parquet(root / "description.parquet")


def worked_example(root: str | Path) -> None:
    """The original layout's documented example: four revisions, two featurizers.

    Revisions revision_0/2/4/6 on 2020-01-01/03/05/07 (naive timestamps), 0 and 4 major;
    featurizer_A and featurizer_B hold ids 0-4, 2-6, 4-8, 6-10 with their ``day``.
    """

    def frame(day: int, featurizer: str) -> pd.DataFrame:
        ids = list(range(day, day + 5))
        return pd.DataFrame(
            {"day": [day] * 5, "featurizer": [featurizer] * 5, "id": ids}
        ).set_index("id")

    write_legacy(
        root,
        [
            (
                f"revision_{day}",
                datetime(2020, 1, 1 + day),
                day % 4 == 0,
                "",
                {f: frame(day, f) for f in ("featurizer_A", "featurizer_B")},
            )
            for day in (0, 2, 4, 6)
        ],
    )
