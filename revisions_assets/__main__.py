"""``python -m revisions_assets``: the ``revisions`` command line."""

from .cli import main

main()
