"""Harnesses shared by the tests: the calendar (dates.py), the property tests' example
counts (examples.py), and the processes of the crash and concurrency tests of tests/core
and tests/s3 (processes.py, the kill and race points, the worker programs they launch by
path)."""
