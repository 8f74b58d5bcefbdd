"""Failures inside Spark jobs, told by their cause: storage failures become ``StorageError``s
naming the path, damaged data files are named with what is wrong with them.

Spark reports a full disk, a denied permission or a missing file as a Py4J/JVM error
whose text buries the cause several ``Caused by:`` deep; a damaged file the same way (a
checksum that Hadoop's local filesystem keeps in a ``.crc`` sidecar no longer matching, a
file Spark cannot decode), and a row whose stored hash disagrees with its values as the
message of the job's ``raise_error`` (``hashing.checked_hash``). Only those causes are
translated; any other failure of a job (a bug in the caller's DataFrame, a UDF raising)
propagates unchanged, since it is not a refusal of the engine: ``spark_cause`` gives its
telling line for a one-line report.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager

from .errors import RevisionsError, StorageError
from .uris import redact

# causes a filesystem or object store reports, as they appear in JVM and Python messages
_STORAGE_CAUSES = re.compile(
    r"No space left on device|Disk quota exceeded|Read-only file system|Permission denied"
    r"|AccessDenied(?:Exception)?|Access Denied|403 Forbidden|File name too long"
    r"|java\.io\.FileNotFoundException|java\.nio\.file\.NoSuchFileException"
    r"|\[PATH_NOT_FOUND\]|Input/output error|NoSuchBucket",
    re.IGNORECASE,
)
#: what a Spark job that found a row whose stored hash disagrees with its values fails
#: with, followed by the file that holds the row (``hashing.checked_hash``)
HASH_MISMATCH = "revisions-assets: a stored row hash disagrees with its row, in file "
_UNREADABLE = "Spark cannot read it"
#: a data file whose bytes are damaged, as Spark reports it: (pattern giving the file, what
#: is wrong with it); the first that matches tells
_DAMAGE = (
    (re.escape(HASH_MISMATCH) + r"(\S+)", "a stored row hash disagrees with its row's values"),
    (
        r"ChecksumException: Checksum error: (\S+) at \d+",
        "its bytes do not match the checksum of its .crc file",
    ),
    (r"\[FAILED_READ_FILE[.\w]*\] Encountered error while reading file (\S+?)\.?\s", _UNREADABLE),
)
#: lines of a JVM error that say nothing of its cause
_NOISE = re.compile(r"^(An error occurred while calling|\s*at |\.\.\. \d+ more|JVM stacktrace)")


def storage_cause(exc: BaseException) -> str | None:
    """The line of a Spark error that names a storage failure, or None for other errors."""
    text = str(exc)
    match = _STORAGE_CAUSES.search(text)
    if match is None:
        return None
    start = text.rfind("\n", 0, match.start()) + 1
    end = text.find("\n", match.end())
    line = text[start : end if end != -1 else len(text)].strip()
    return redact(line[:300])


def damaged_file(exc: BaseException) -> tuple[str, str] | None:
    """(the file as Spark names it, what is wrong with it) when a Spark job failed on a
    damaged data file; None for other failures."""
    text = str(exc)
    for pattern, problem in _DAMAGE:
        match = re.search(pattern, text)
        if match is not None:
            if problem == _UNREADABLE:
                problem += f" ({spark_cause(exc)})"
            return match.group(1), problem
    return None


def spark_cause(exc: BaseException) -> str:
    """The line of a Spark error that tells its cause: the deepest ``Caused by:``, else its
    first line that is not Py4J's call or a stack frame (the error class and message)."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    causes = [line.removeprefix("Caused by: ") for line in lines if line.startswith("Caused by:")]
    telling = [line.lstrip(": ") for line in lines if not _NOISE.match(line)]
    line = causes[-1] if causes else telling[0] if telling else type(exc).__name__
    return redact(line[:300])


@contextmanager
def spark_storage_errors(operation: str, where: str) -> Iterator[None]:
    """Re-raise a storage failure of the Spark work inside as a StorageError."""
    try:
        yield
    except RevisionsError:
        raise
    except Exception as exc:
        cause = storage_cause(exc)
        if cause is None:
            raise
        raise StorageError(f"{operation} {where}: {cause}") from exc
