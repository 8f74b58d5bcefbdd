"""The ``revisions`` group and its command registry.

Commands live in modules by what they need: ``log_commands`` (logs only, no Spark),
``data_commands`` (Spark reads), ``import_commands``. Each module lists its click commands
in ``COMMANDS``; the group registers the modules of ``COMMAND_MODULES`` in order, which is
also the order of ``--help``: ``log_commands``, ``data_commands``,
``maintenance_commands`` (verify, compact, vacuum, purge), ``import_commands``.
"""

from __future__ import annotations

import click

from .. import __version__
from . import data_commands, import_commands, log_commands, maintenance_commands
from .common import EXIT_CODES, RevisionsGroup, set_debug

COMMAND_MODULES = (log_commands, data_commands, maintenance_commands, import_commands)


def build_cli() -> RevisionsGroup:
    group = RevisionsGroup(
        name="revisions",
        help=(
            "Look at revisioned datasets (local paths or s3:// roots) and act on them.\n\n"
            "Exit codes: "
            + "; ".join(f"{code} {meaning}" for code, meaning in EXIT_CODES.items())
            + "."
        ),
        params=[
            click.Option(
                ["--debug"],
                is_flag=True,
                is_eager=True,
                expose_value=False,
                callback=set_debug,
                help="Show the traceback of an error.",
            )
        ],
        context_settings={"help_option_names": ["-h", "--help"]},
    )
    group = click.version_option(__version__, prog_name="revisions")(group)
    for module in COMMAND_MODULES:
        for command in module.COMMANDS:
            group.add_command(command)
    return group


cli = build_cli()


def main() -> None:
    """The console script ``revisions`` and ``python -m revisions_assets``."""
    cli.main(prog_name="revisions")
