"""``import-legacy``: a dataset of the original layout onto the engine, with its history."""

from __future__ import annotations

import warnings

import click
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from ..core.errors import DatasetNotEmptyError
from ..core.log.records import Revision
from .common import (
    common_options,
    engine_command,
    json_option,
    split_columns,
    start_spark,
    storage_options,
)
from .output import Output, warn


@click.command("import-legacy")
@click.argument("src")
@click.argument("root")
@click.option(
    "--id-columns",
    multiple=True,
    help="Id columns of every table (a,b or repeated); default: each featurizer's pandas index.",
)
@click.option(
    "--tz", default="UTC", show_default=True, help="Zone of naive timestamps in the description."
)
@json_option
@common_options
def import_legacy_command(
    src: str,
    root: str,
    id_columns: tuple[str, ...],
    tz: str,
    as_json: bool,
    endpoint_url: str | None,
) -> None:
    """Import SRC (description.parquet + <revision>/<featurizer>/*.parquet) into ROOT.

    Same revisions, names, timestamps, majors and versions; each featurizer becomes a
    table. SRC is only read; ROOT must have no revisions. A progress bar shows on stderr
    (not with --json).
    """
    with engine_command():
        from ..core.dataset import RevisionedDataset
        from ..core.maintain.legacy import LegacyRevision, NaiveTimestampWarning, plan_import

    options = storage_options(endpoint_url)
    ids = split_columns(id_columns) or None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        # checked on the driver before Spark starts: a bad source fails fast
        plan = plan_import(src, id_columns=ids, tz=tz, storage_options=options)
        target = RevisionedDataset(root, read_only=True, storage_options=options)
        if target.head_sequence:
            raise DatasetNotEmptyError(
                f"{target.root} already has {target.head_sequence} revisions; import into a "
                "new root"
            )
        for message in dict.fromkeys(str(w.message) for w in caught):
            warn(message)
        caught.clear()
        progress = Progress(
            TextColumn("importing {task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=Console(stderr=True),
            disable=as_json,
        )
        task = progress.add_task("", total=len(plan.revisions))

        def advance(revision: LegacyRevision, _record: Revision | None) -> None:
            progress.update(task, advance=1, description=revision.name)

        with progress:
            ds = RevisionedDataset.import_legacy(
                src,
                root,
                spark=start_spark(target, endpoint_url),
                id_columns=ids,
                tz=tz,
                storage_options=options,
                progress=advance,
            )
    for message in dict.fromkeys(
        str(w.message) for w in caught if not issubclass(w.category, NaiveTimestampWarning)
    ):  # the naive timestamps were reported once, before the import
        warn(message)
    records = ds.revisions()
    majors = sum(r.is_major for r in records)
    tables = {t: list(i.id_columns) for t, i in ds.tables().items()}
    out = Output(as_json)
    if as_json:
        out.json(
            {
                "root": ds.root,
                "revisions": len(records),
                "majors": majors,
                "minors": len(records) - majors,
                "tables": [{"table": t, "id_columns": ids} for t, ids in tables.items()],
            }
        )
        return
    listed = ", ".join(f"{t} [{', '.join(ids)}]" for t, ids in tables.items())
    out.note(
        f"imported {len(records)} revisions ({majors} major, {len(records) - majors} minor) "
        f"into {ds.root}: {listed}"
    )


COMMANDS = (import_legacy_command,)
