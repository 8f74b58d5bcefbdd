"""The default code location: the demo, its assets declared as components
(``revisions_assets/demo/defs/``).

Loaded by ``[tool.dg]`` (``dg dev``, ``dg check defs``, ``dg list defs``), workspace.yaml,
``[tool.dagster]`` and dagster_cloud.yaml.
"""

from revisions_assets.demo.definitions import load_definitions

defs = load_definitions()
