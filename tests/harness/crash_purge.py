"""A purge of id 3 from table ``t`` that stops at one step, to be killed.

Run by tests/core/test_purge_crash.py: ``python crash_purge.py ROOT MARKER MODE``.
MODE: ``purge_before_entry`` (its files rewritten, its entry not committed) or
``purge_after_entry`` (committed, description.parquet not rewritten).
"""

from __future__ import annotations

from harness.frames import frame
from harness.kill_points import local_victim

ds, spark, patch, mode = local_victim()
if mode == "purge_before_entry":  # its files are rewritten, its entry is not committed
    patch("create_exclusive", lambda rel, data: rel.startswith("_log/"))
else:  # committed, description.parquet not rewritten
    patch("write", lambda rel, data: rel == "description.parquet")
ds.maintenance.purge("t", frame(spark, [(3,)], "id long"), reason="crash test")
print("returned: the kill point was never reached", flush=True)
