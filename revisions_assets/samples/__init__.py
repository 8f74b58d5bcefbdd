"""Small revisioned datasets shipped with the package, to try the reader in the base install
without writing one first (docs/guides/notebook.md).

The engine wrote them (``writing.py``; the maintainers rerun ``python -m
revisions_assets.samples`` when the format changes, and a test checks that the shipped copy
reads as a fresh one). Copying one needs neither Spark nor pandas.
"""

from __future__ import annotations

import shutil
from os import PathLike
from pathlib import Path

from ..core.errors import DatasetNotEmptyError, InvalidArgumentError

HERE = Path(__file__).parent
#: the samples shipped with the package: name -> what it holds
SAMPLES = {
    "features": "revisions 0, 2, 4 and 6 of tables featurizer_A and featurizer_B, stamped "
    "2020-01-01, -03, -05 and -07; 0 and 4 are majors",
}


def copy_sample(name: str, target: str | PathLike[str]) -> Path:
    """Copy the sample dataset ``name`` (see ``SAMPLES``) to the local folder ``target``,
    made if absent, and return its path: a dataset to open with ``DatasetReader``, or to
    write to with the engine. A ``target`` that already holds files is refused, never
    overwritten."""
    if name not in SAMPLES:
        known = ", ".join(repr(n) for n in SAMPLES)
        raise InvalidArgumentError(f"no sample named {name!r}; the samples are {known}")
    destination = Path(target)
    if destination.exists() and any(destination.iterdir()):
        raise DatasetNotEmptyError(
            f"{destination}: the folder already holds files; copy_sample({name!r}, ...) needs "
            "an empty or new folder (remove it, or name another one)"
        )
    shutil.copytree(HERE / name, destination, dirs_exist_ok=True)
    return destination
