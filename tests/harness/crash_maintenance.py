"""A compaction or a vacuum that stops at one step, to be killed.

Run by tests/core/test_lifecycle_crash.py: ``python crash_maintenance.py ROOT MARKER MODE``.
MODE: ``compaction_before_entry`` (its files written, its entry not),
``compaction_after_entry`` (committed, description.parquet not rewritten),
``vacuum_marked`` (the vacuum entry committed, nothing deleted yet) or
``vacuum_deleting`` (one folder deleted).
"""

from __future__ import annotations

from datetime import timedelta

from harness.kill_points import local_victim

ds, spark, patch, mode = local_victim()
deletions = []
if mode == "compaction_before_entry":  # its files are written, its entry is not
    patch("create_exclusive", lambda rel, data: rel.startswith("_log/"))
elif mode == "compaction_after_entry":  # committed, description.parquet not rewritten
    patch("write", lambda rel, data: rel == "description.parquet")
elif mode == "vacuum_marked":  # the vacuum entry is committed, nothing deleted yet
    patch("delete_tree", lambda rel: True)
    patch("delete_files", lambda rels: True)
elif mode == "vacuum_deleting":  # one folder deleted, then killed
    patch("delete_tree", lambda rel: deletions.append(rel) or len(deletions) == 2)
if mode.startswith("compaction"):
    ds.maintenance.compact()
else:
    ds.maintenance.vacuum(retain=timedelta(0))
print("returned: the kill point was never reached", flush=True)
