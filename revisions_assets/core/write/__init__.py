"""Writes: the commit transaction, the checks made before a commit, and the row hash."""
