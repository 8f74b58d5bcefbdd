"""Benchmarks of revisions-assets: ratios measured side by side in one run (see run.py)."""
