"""The demo's assets, declared as components (one ``defs.yaml`` per asset).

``revisions_assets.demo.definitions.load_definitions`` loads this folder with
``dg.load_from_defs_folder`` (``[tool.dg.project] defs_module``) and adds the checks,
automation and resources around it: the default code location.
"""
