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
