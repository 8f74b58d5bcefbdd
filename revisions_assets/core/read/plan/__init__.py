"""Planning reads: pure functions of one snapshot of the log, no engine."""
