"""One error root for everything the engine refuses to do.

Every message names the dataset, table, column or value involved and, where
there is one, the way out.
"""

from __future__ import annotations


class RevisionsError(Exception):
    """Base class of every error raised by revisions-assets."""


class InvalidNameError(RevisionsError, ValueError):
    """A table or revision name that is malformed or could escape the dataset root."""


class NaiveTimestampError(RevisionsError, ValueError):
    """A timestamp without a timezone: refused rather than guessed as local time."""


class UnknownTableError(RevisionsError, KeyError):
    """A table that the dataset does not have (or was not declared)."""

    def __str__(self) -> str:  # KeyError quotes its message otherwise
        return str(self.args[0]) if self.args else ""


class UnknownRevisionError(RevisionsError, KeyError):
    """A positional reference (name, sequence, HEAD~n) that matches no revision."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class NoMajorRevisionError(RevisionsError):
    """A read before the first major revision, or a minor on a table without a major."""


class DuplicateRevisionNameError(RevisionsError, ValueError):
    """A custom revision name that is already taken in the log."""


class IdColumnsError(RevisionsError, ValueError):
    """Id columns missing from the data, or different from the ones the table was created with."""


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
    """A log entry that cannot be read back; the dataset needs attention."""


class StorageError(RevisionsError):
    """The storage backend refused an operation (permissions, missing bucket, ...)."""


class RetentionError(RevisionsError):
    """A read, time-travel read or change read that needs files a vacuum removed (SPEC §8),
    or a major stamped before data a vacuum removed. Never partial data instead."""
