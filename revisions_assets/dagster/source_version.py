"""A code version derived from the asset's own code, opt-in (docs/guides/versions.md).

A revisioned asset's ``code_version`` is what makes its next run a major; bumping it by
hand is easy to forget. ``code_version=SourceVersion()`` (in YAML ``code_version: "{{
source_version() }}"``) derives it from the code of the asset's functions, as dagster-dbt
derives a model's from its SQL: a featurized asset's function and its ``source``, a scoring
asset's function, a reference's snapshot function, plus ``also=`` (helpers they call).

It is a digest of their syntax trees, not of their text: a comment, a blank line, a
reformatting, a docstring, a decorator or a function's name change nothing; any other edit
of those functions does (a renamed variable too: a major re-evaluates every entity). Code
outside them (a module they import, a constant, a helper not in ``also``) is not seen:
bump such a change by hand, with a code version of your own.
"""

import ast
import hashlib
import inspect
import textwrap
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from revisions_assets.core.errors import InvalidArgumentError

#: the prefix of a derived version (``src-<12 hex digits>``)
PREFIX = "src-"


@dataclass(frozen=True)
class SourceVersion:
    """A ``code_version`` derived from the asset's functions (and ``also``): see the module
    doc. Resolved when the asset is declared (``of``)."""

    #: more functions whose code counts (helpers the asset's functions call)
    also: Sequence[Callable[..., Any]] = field(default_factory=tuple)

    def of(self, *functions: Callable[..., Any] | None) -> str:
        """The version of ``functions`` (None skipped) and ``also``."""
        digest = hashlib.sha256()
        for fn in [*(f for f in functions if f is not None), *self.also]:
            digest.update(_syntax(fn).encode())
        return PREFIX + digest.hexdigest()[:12]


def code_version_of(version: "str | SourceVersion", *functions: Callable[..., Any] | None) -> str:
    """``version`` as the asset's code version: as it is, or derived from ``functions``."""
    return version.of(*functions) if isinstance(version, SourceVersion) else version


def _syntax(fn: Callable[..., Any]) -> str:
    """A function's arguments and body as a syntax tree (no name, decorators or docstring)."""
    target = inspect.unwrap(fn)
    try:
        source = textwrap.dedent(inspect.getsource(target))
    except (OSError, TypeError) as exc:
        raise InvalidArgumentError(
            f"SourceVersion: the source of {fn!r} cannot be read ({exc}); give a code "
            "version by hand"
        ) from exc
    node = ast.parse(source).body[0]
    if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
        raise InvalidArgumentError(
            f"SourceVersion: {fn!r} is not a function defined with def; give a code version by hand"
        )
    body = node.body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        if isinstance(body[0].value.value, str):
            body = body[1:]  # the docstring
    return "".join(ast.dump(part) for part in [node.args, *body])
