"""``revisions``: the operator's command line (also ``python -m revisions_assets``)."""

from .app import COMMAND_MODULES, cli, main

__all__ = ["COMMAND_MODULES", "cli", "main"]
