"""What reads return: the same types for both engines (Spark DataFrames from
``RevisionedDataset``, Polars DataFrames from ``DatasetReader``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic, TypeVar

from ..log.records import Revision

Frame = TypeVar("Frame")
SchemaT = TypeVar("SchemaT")


@dataclass(frozen=True)
class TableInfo(Generic[SchemaT]):
    """A table: its id columns and the schema a read at the head returns (a Spark
    ``StructType`` from ``RevisionedDataset.tables()``, a Polars schema from
    ``DatasetReader.tables()``)."""

    name: str
    id_columns: tuple[str, ...]
    schema: SchemaT


@dataclass(frozen=True)
class ChangeSet(Generic[Frame]):
    """The result of a change read.

    ``df`` has the table's columns (the ids and the projection, with ``columns=``) plus
    ``_deleted``; when ``is_reset`` it is the full state and consumers must replace, not
    merge. ``until_sequence`` is the head the read was pinned to: a consumer records it as
    its new position.

    ``changed`` (a reset only, else None): the soft major, the entities of ``df`` whose row
    hash differs from the state at the read's ``since``/``since_sequence`` (added or changed,
    ``_deleted`` false; a null hash counts as changed), plus the entities that state had
    and ``df`` lacks (``_deleted`` true, ids only), in ``df``'s columns; only changes of
    the read's ``compared_columns`` count, when it names some. Without a ``since`` that state
    is empty and ``changed`` holds every row of ``df``.
    """

    df: Frame
    is_reset: bool
    revisions: tuple[Revision, ...]
    since_sequence: int | None = None
    until_sequence: int = 0
    changed: Frame | None = None
