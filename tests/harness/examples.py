"""How many examples a property test draws.

``./dev.sh test`` (and CI) load hypothesis's built-in ``ci`` profile: derandomized, no
example database, so every run replays the same examples and a failure reproduces.
``./dev.sh explore`` loads the ``explore`` profile (registered in tests/conftest.py):
randomized, and every property test draws at least ``EXPLORE_EXAMPLES`` new examples.
What it finds is kept as an explicit case (an ``@example`` or a worked test).
"""

from __future__ import annotations

import os

from hypothesis import settings

EXPLORE = "explore"
#: the examples each property test draws at least when exploring (``./dev.sh explore N``)
EXPLORE_EXAMPLES = int(os.environ.get("EXPLORE_EXAMPLES") or 100)


def examples(suite: int) -> int:
    """``suite`` examples in the suite, at least ``EXPLORE_EXAMPLES`` when exploring."""
    if settings.get_current_profile_name() == EXPLORE:
        return max(suite, EXPLORE_EXAMPLES)
    return suite
