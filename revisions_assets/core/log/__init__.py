"""The description log, the transaction keeper: immutable records, the log and its checkpoints,
its health checks, the effective view reads walk, and the layout that names every file."""
