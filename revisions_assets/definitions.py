"""The default code location: the demo (``[tool.dg]``: ``dg dev``/``dg check defs``/``dg list defs``;
workspace.yaml, ``[tool.dagster]``, dagster_cloud.yaml)."""

from revisions_assets.demo.definitions import build_definitions

defs = build_definitions()
