"""Process harnesses shared by the crash and concurrency tests of tests/core and tests/s3."""
