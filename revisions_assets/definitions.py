"""The default code location: the demo.

Loaded by ``[tool.dg]`` (``dg dev``, ``dg check defs``, ``dg list defs``), workspace.yaml,
``[tool.dagster]`` and dagster_cloud.yaml.
"""

from revisions_assets.demo.definitions import build_definitions

defs = build_definitions()
