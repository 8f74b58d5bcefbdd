"""Where a dataset's bytes live: the storage interface, local files, S3, and opening a root."""
