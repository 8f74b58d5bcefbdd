"""What /proc says about running processes, read so that a process ending meanwhile is no error.

Listing /proc and reading each process's ``stat`` are two steps: a process that ends in
between has no ``stat`` left to read (``FileNotFoundError``, or ``ProcessLookupError`` while
it is reaped). Such a process is simply not running any more, so it is left out.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator


def process_stats(pids: Iterable[str] | None = None) -> Iterator[tuple[int, list[str]]]:
    """(pid, the fields of its ``stat`` after the command name) of every running process
    (of ``pids`` when given: the names of /proc entries)."""
    listed = os.listdir("/proc") if pids is None else pids
    for pid in listed:
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/stat") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
        except (OSError, IndexError):  # ended since it was listed
            continue
        yield int(pid), fields


def children_of(parent: int, pids: Iterable[str] | None = None) -> list[int]:
    """The running processes whose parent is ``parent``."""
    return [pid for pid, fields in process_stats(pids) if int(fields[1]) == parent]
