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
    """Copy the sample dataset ``name`` to the local folder ``target``, made if absent, and
    return its path: a dataset to open with ``DatasetReader`` (or to write to with the
    engine). ``features`` is the notebook guide's worked example. A ``target`` that is a
    file or a folder holding files is refused, never overwritten."""
    if name not in SAMPLES:
        known = ", ".join(repr(n) for n in SAMPLES)
        raise InvalidArgumentError(f"no sample named {name!r}; the samples are {known}")
    if "://" in str(target):
        raise InvalidArgumentError(
            f"copy_sample({name!r}, {str(target)!r}): the target is a local folder; copy the "
            "sample locally, then upload the folder to open it from object storage"
        )
    destination = Path(target)
    if destination.exists() and (not destination.is_dir() or any(destination.iterdir())):
        raise DatasetNotEmptyError(
            f"{destination}: not an empty folder; copy_sample({name!r}, ...) needs an empty or "
            "new folder (remove it, or name another one)"
        )
    shutil.copytree(HERE / name, destination, dirs_exist_ok=True)
    return destination
