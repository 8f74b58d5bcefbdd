"""Storage failures inside Spark jobs become ``StorageError``s naming the path.

Spark reports a full disk, a denied permission or a missing file as a Py4J/JVM error
whose text buries the cause several ``Caused by:`` deep. Only those storage causes are
translated; any other failure of a job (a bug in the caller's DataFrame, a UDF raising)
propagates unchanged, since it is not a refusal of the engine.
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
