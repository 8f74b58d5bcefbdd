"""One error root for everything the engine refuses to do.

Every message names the dataset, table, column, argument or value involved and, where
there is one, the way out. Some classes also derive from ``ValueError``/``TypeError``/
``KeyError`` so that generic handlers keep working; catch ``RevisionsError`` to catch all.
"""

from __future__ import annotations


class RevisionsError(Exception):
    """Base class of every error raised by revisions-assets."""


class MissingExtraError(RevisionsError, ImportError):
    """A feature whose packages are not installed: the message names the extra that brings
    them (``pip install 'revisions-assets[spark]'``)."""


class InvalidArgumentError(RevisionsError, ValueError):
    """An argument value the engine cannot accept: unknown option, out of range, or
    arguments that contradict each other (``since`` with ``since_sequence``, ``since > until``)."""


class ArgumentTypeError(InvalidArgumentError, TypeError):
    """An argument of the wrong type (``is_major="False"``, ``version=123``, a pandas
    DataFrame where a Spark one is needed, ``at=1.5``)."""


class UnsupportedConversionError(InvalidArgumentError):
    """A conversion of a scan that its handle does not offer (``to_spark()`` on
    ``DatasetReader``, ``to_polars()`` on ``RevisionedDataset``): names the handle that does."""


class InvalidTimestampError(InvalidArgumentError):
    """A value that is not a point in time: an int, None, NaN/NaT, an unparsable string."""


class NaiveTimestampError(InvalidTimestampError):
    """A timestamp without a timezone: refused rather than guessed as local time."""


class InvalidNameError(InvalidArgumentError):
    """A table, revision or column name that is malformed, too long, reserved, or could
    escape the dataset root."""


class UnknownTableError(RevisionsError, KeyError):
    """A table that the dataset does not have (or was not declared)."""

    def __str__(self) -> str:  # KeyError quotes its message otherwise
        return str(self.args[0]) if self.args else ""


class UnknownRevisionError(RevisionsError, KeyError):
    """A positional reference (name, sequence, HEAD~n) that matches no revision."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class AmbiguousRevisionError(UnknownRevisionError):
    """A revision-name prefix that several revisions share: the message lists them."""


class NoMajorRevisionError(RevisionsError):
    """A read before the first major revision, or a minor on a table without a major."""


class DuplicateRevisionNameError(RevisionsError, ValueError):
    """A custom revision name that is already taken in the log."""


class IdColumnsError(RevisionsError, ValueError):
    """Id columns missing from the data, of a type that cannot identify an entity (map,
    array, struct, binary, floating point), or different from the table's recorded ones."""


class DuplicateColumnError(RevisionsError, ValueError):
    """Two columns of one table with the same name (compared case-insensitively, as Spark
    and Parquet readers do)."""


class NullIdError(RevisionsError, ValueError):
    """Rows whose id columns are null."""


class DuplicateIdError(RevisionsError, ValueError):
    """The same entity twice in one table of one revision."""


class SchemaMismatchError(RevisionsError, ValueError):
    """A minor whose schema is incompatible with the table's current major."""


class CommitConflictError(RevisionsError):
    """The log kept moving under a writer; nothing was committed."""


class ConsumerPositionConflictError(CommitConflictError):
    """A consumer committed from an upstream position that another commit already moved past."""


class CorruptLogError(RevisionsError):
    """The log is damaged: an entry that cannot be read back, has the wrong shape, references
    a file outside the root, or a gap in the sequence. Nothing is written until it is repaired
    (see ``RevisionedDataset.maintenance.verify()`` and the recovery guide of the docs)."""


class StorageError(RevisionsError):
    """The storage backend refused an operation (permissions, disk full, missing bucket, ...)."""


class StorageOptionsError(StorageError, InvalidArgumentError):
    """Storage options that do not apply to the root (``storage_options`` on a local path,
    unknown S3 options) or credentials embedded in a root URI."""


class PathEscapeError(StorageError):
    """A path that would leave the dataset root: ``..``, an absolute path, or a symbolic link
    (a revision or table folder, a log entry) that resolves outside the root."""


class MissingFileError(StorageError):
    """A data file that the log references is gone from storage."""


class CorruptFileError(StorageError):
    """A data file that the log references is not a Parquet file (replaced or truncated)."""


class NotCachedError(StorageError):
    """An offline ``DatasetReader`` needs a file (or the log) its download cache lacks."""


class ReadOnlyDatasetError(RevisionsError):
    """A write (commit, maintenance) through a handle opened with ``read_only=True``."""


class DatasetNotFoundError(RevisionsError):
    """A root that holds no revisioned dataset (no log), where one is required."""


class LegacyLayoutError(DatasetNotFoundError):
    """A root in the original UpdatableDataset layout (a ``description.parquet`` and revision
    folders, no log): import it with ``RevisionedDataset.import_legacy``; never opened as is."""


class DatasetNotEmptyError(RevisionsError):
    """A target that already has revisions, where an empty one is required (an import)."""


class RetentionError(RevisionsError):
    """A read, time-travel read or change read that needs files a vacuum removed
    (docs/concepts/lifecycle.md),
    or a major stamped before data a vacuum removed. Never partial data instead."""


class CarriedStateError(RevisionsError, ValueError):
    """A major stamped before a carrying major would void revisions that major carries:
    their rows would drop out of the state and come back at the carrying major's time."""


class ChangeFeedError(RevisionsError):
    """A change feed (``spark.readStream.format("revisions")``) that cannot go on as it was
    started: a major under ``onMajor=fail``, a schema the query did not start with, a
    checkpoint of another table. The message says how to restart it."""
