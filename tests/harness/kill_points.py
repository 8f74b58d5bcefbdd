"""The victim's side of ``processes.kill_at_markers``: stop at a chosen step and wait there.

Imported by the processes the crash tests start (``start_victim`` puts tests/ on their
path): ``stop_at(owner, "method", hit, marker, label)`` makes ``owner.method`` drop the
marker and block forever when ``hit`` (given the call's arguments, ``self`` included for
methods) says so; the test then SIGKILLs the process group.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn


def stop_here(marker: Path, label: str) -> NoReturn:
    marker.write_text(label)
    while True:  # the test kills us here
        time.sleep(1)


def stop_at(owner: Any, attr: str, hit: Callable[..., bool], marker: Path, label: str) -> None:
    original = getattr(owner, attr)

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if hit(*args, **kwargs):
            stop_here(marker, label)
        return original(*args, **kwargs)

    setattr(owner, attr, wrapper)


def local_victim() -> tuple[Any, Any, Callable[[str, Callable[..., bool]], None], str]:
    """The start of a victim on a local dataset, from ``sys.argv`` = (root, marker, mode):
    a one-core Spark session, the dataset handle, ``patch(method, hit)`` stopping at a
    ``LocalStorage`` method when ``hit(*args)`` (arguments without ``self``) says so, and
    the mode. Returns ``(ds, spark, patch, mode)``."""
    import sys

    from harness.sessions import PROCESS_CONF
    from revisions_assets import RevisionedDataset
    from revisions_assets.core.spark_session import build_spark_session
    from revisions_assets.core.storage.base import LocalStorage

    root, marker, mode = sys.argv[1], Path(sys.argv[2]), sys.argv[3]

    def patch(attr: str, hit: Callable[..., bool]) -> None:
        stop_at(LocalStorage, attr, lambda self, *args: hit(*args), marker, mode)

    spark = build_spark_session(master="local[1]", app_name=f"crash-{mode}", conf=PROCESS_CONF)
    return RevisionedDataset(root, spark=spark), spark, patch, mode
