"""Names kept for a release after they moved: calling one warns, naming the new call."""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable
from typing import Any, TypeVar

#: the release in which the deprecated names stop working
REMOVED_IN = "0.2.0"

F = TypeVar("F", bound=Callable[..., Any])


def warn_deprecated(old: str, new: str, stacklevel: int = 3) -> None:
    """A DeprecationWarning for ``old``, naming ``new``, attributed to the caller's caller."""
    warnings.warn(
        f"{old} is deprecated and stops working in {REMOVED_IN}: call {new} instead",
        DeprecationWarning,
        stacklevel=stacklevel,
    )


def deprecated(old: str, new: str) -> Callable[[F], F]:
    """A method (or a property's getter) under its old name: each call warns."""

    def wrap(method: F) -> F:
        @functools.wraps(method)
        def shim(*args: Any, **kwargs: Any) -> Any:
            warn_deprecated(old, new)
            return method(*args, **kwargs)

        return shim  # type: ignore[return-value]

    return wrap
