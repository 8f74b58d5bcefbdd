"""The default code location (``dagster dev``, ``[tool.dagster]``, dagster_cloud.yaml): the demo."""

from revisions_assets.demo.definitions import build_definitions

defs = build_definitions()
