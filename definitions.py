"""This project's default code location: the demo, its assets declared as components
(``revisions_assets/demo/defs/``), on the datasets and Spark that ``resources/`` configures.

Loaded by ``[tool.dg]`` (``dg dev``, ``dg check defs``, ``dg list defs``), workspace.yaml,
``[tool.dagster]`` and dagster_cloud.yaml; not part of the ``revisions-assets`` wheel.
"""

from resources import datasets_root, spark
from revisions_assets.demo.definitions import load_definitions

defs = load_definitions(datasets_root(), spark())
