"""What every command shares: the group (errors and exit codes), options, opening roots.

Exit codes (``EXIT_CODES``, documented in the command-line guide): 0 ok; 1 a check found
something (``verify`` errors, ``lag`` past its thresholds); 2 usage: a bad option or
argument, a root that is no dataset, an unknown table or revision, a time outside the
data; 3 a dataset or storage error: a damaged log or data file, storage or the network
refusing, a commit that lost a race, Spark failing, any unexpected error. Always one line
on stderr (``--debug`` adds the traceback), and nothing on stdout (``output.flush`` prints
what a command printed only once it ended). A closed pipe (``revisions log ROOT | head``)
ends quietly with 141, as a process killed by SIGPIPE does.
"""

from __future__ import annotations

import os
import re
import sys
import threading
import traceback
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import urlparse

import click

from ..core.errors import (
    CommitConflictError,
    CorruptLogError,
    InvalidArgumentError,
    RevisionsError,
    StorageError,
)
from ..core.extras import needs_extra
from ..core.log.layout import not_a_dataset
from ..core.spark_errors import spark_cause
from ..core.timeutil import to_utc
from . import output

if TYPE_CHECKING:  # the commands that need Spark import it when they run: the others start fast
    from pyspark.sql import SparkSession

    from ..core.dataset import RevisionedDataset
    from ..core.log.revision_log import RevisionLog
    from ..core.reader import DatasetReader

EXIT_OK = 0
EXIT_FINDINGS = 1
EXIT_USAGE = 2
EXIT_DATASET = 3
#: a closed pipe: what the shell reports for a process killed by SIGPIPE (128 + 13)
EXIT_CLOSED_PIPE = 141
#: what each exit code means (``revisions --help`` and the guide say the same)
EXIT_CODES = {
    EXIT_OK: "ok",
    EXIT_FINDINGS: "a check found something (verify errors, lag past --max-behind/--max-age)",
    EXIT_USAGE: "usage: a bad option or argument, no dataset at ROOT, an unknown table or "
    "revision, a time outside the data",
    EXIT_DATASET: "a dataset or storage error: a damaged log or file, storage or the network "
    "failing, a lost commit race, any unexpected error",
    EXIT_CLOSED_PIPE: "stdout was closed before the output ended (| head), as for SIGPIPE",
}
_DEBUG = "revisions.debug"

F = TypeVar("F", bound=Callable[..., Any])


class InputError(click.ClickException):
    """Bad input: a one-line message, exit code 2."""

    exit_code = EXIT_USAGE


class DatasetError(click.ClickException):
    """The dataset or its storage failed: a one-line message, exit code 3."""

    exit_code = EXIT_DATASET


def exit_code_of(exc: RevisionsError) -> int:
    """3 when the dataset or its storage failed (damage, storage, a lost race), 2 when the
    request was wrong (options that do not apply to a root are a request's fault)."""
    if isinstance(exc, InvalidArgumentError):
        return EXIT_USAGE
    if isinstance(exc, StorageError | CorruptLogError | CommitConflictError):
        return EXIT_DATASET
    return EXIT_USAGE


def first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def debugging(ctx: click.Context | None = None) -> bool:
    ctx = ctx or click.get_current_context(silent=True)
    return bool(ctx and ctx.find_root().meta.get(_DEBUG))


class RevisionsGroup(click.Group):
    """The ``revisions`` group: commands in registration order, one-line errors."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(self.commands)

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except (click.ClickException, click.exceptions.Exit, click.Abort, BrokenPipeError):
            raise
        except RevisionsError as exc:
            if debugging(ctx):
                traceback.print_exc()
            if exit_code_of(exc) == EXIT_DATASET:
                raise DatasetError(str(exc)) from exc
            raise InputError(str(exc)) from exc
        except KeyboardInterrupt:
            raise click.Abort() from None
        except Exception as exc:
            if debugging(ctx):
                traceback.print_exc()
            raise DatasetError(
                f"unexpected {type(exc).__name__}: {spark_cause(exc)} (--debug shows the traceback)"
            ) from exc

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True, **extra):
        output.discard()
        try:
            result = super().main(
                args, prog_name or "revisions", complete_var, standalone_mode=False, **extra
            )
            code = result if isinstance(result, int) else 0  # ctx.exit(n) returns n
            output.flush()  # it ended (ok, or a check found something): what it printed
        except click.ClickException as exc:
            output.discard()  # an error leaves stdout empty
            message = exc.format_message().replace("\n", " ")
            if isinstance(exc, click.UsageError) and exc.ctx is not None:
                message += f" (see '{exc.ctx.command_path} --help')"
            click.echo(f"revisions: error: {message}", err=True)
            code = exc.exit_code
        except click.Abort:
            output.discard()
            click.echo("revisions: interrupted", err=True)
            code = 130
        except BrokenPipeError:  # the reader went away (| head): nothing more to say
            output.discard()
            code = closed_stdout()
        if standalone_mode:
            sys.exit(code)
        return code


def closed_stdout() -> int:
    """Point stdout at /dev/null, so that the interpreter's last flush cannot fail on the
    closed pipe again, and return its exit code."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, sys.stdout.fileno())
    except (AttributeError, OSError, ValueError):  # a replaced stdout (tests): nothing to point
        pass
    finally:
        os.close(devnull)
    return EXIT_CLOSED_PIPE


def set_debug(ctx: click.Context, _param: click.Parameter, value: bool) -> bool:
    if value:
        ctx.find_root().meta[_DEBUG] = True
    return value


def common_options(f: F) -> F:
    """``--debug`` and ``--endpoint-url``, on every command."""
    f = click.option(
        "--endpoint-url",
        envvar="AWS_ENDPOINT_URL_S3",
        help="S3-compatible endpoint for s3:// roots (default: the AWS environment).",
    )(f)
    f = click.option(
        "--debug",
        is_flag=True,
        is_eager=True,
        expose_value=False,
        callback=set_debug,
        help="Show the traceback of an error.",
    )(f)
    return f


def json_option(f: F) -> F:
    return click.option(
        "--json", "as_json", is_flag=True, help="Machine-readable output (JSON on stdout)."
    )(f)


def limit_option(default: int, paged: bool = False) -> Callable[[F], F]:
    """``--limit``: ``default`` rows in a table; every row with ``--json`` unless given
    (``rows_limit`` applies it): JSON returns what was asked. ``paged``: with ``--json``
    and a limit, the rows come in an object that says whether some were left out
    (``Output.limited``)."""
    paging = ' With --json and a limit: {"rows", "limit", "truncated", "total"}.' if paged else ""
    return click.option(
        "--limit",
        type=click.IntRange(min=0),
        default=None,
        help=f"At most this many rows (0: all). Default: {default} in a table, all with --json."
        + paging,
    )


def rows_limit(limit: int | None, as_json: bool, default: int) -> int:
    """The ``--limit`` in force: as given, else ``default`` for people and 0 (all) for JSON."""
    if limit is not None:
        return limit
    return 0 if as_json else default


_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}
_DURATION = re.compile(r"^(\d+(?:\.\d+)?)([smhdw])$")


class Duration(click.ParamType):
    """``7d``, ``12h``, ``30m``, ``45s``, ``2w`` or ``0``."""

    name = "duration"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, timedelta):
            return value
        text = str(value).strip()
        if text == "0":
            return timedelta(0)
        match = _DURATION.match(text)
        if not match:
            self.fail(f"{value!r} is not a duration: use e.g. 7d, 12h, 30m, 45s or 0", param, ctx)
        return timedelta(**{_UNITS[match[2]]: float(match[1])})


DURATION = Duration()


def storage_options(endpoint_url: str | None) -> dict[str, object] | None:
    return {"endpoint_url": endpoint_url} if endpoint_url else None


def open_log(root: str, endpoint_url: str | None) -> RevisionLog:
    """The log of the dataset at ``root``, read in this process (no Spark, no data read);
    refused when there is none."""
    from ..core.log.revision_log import RevisionLog
    from ..core.storage.backends import open_storage

    storage = open_storage(root, **(storage_options(endpoint_url) or {}))
    revision_log = RevisionLog(storage)
    if not revision_log.refresh():  # a root of the original layout is refused on open
        raise not_a_dataset(storage)
    return revision_log


def open_reader(root: str, endpoint_url: str | None) -> DatasetReader:
    """The dataset at ``root`` for reading in this process; refused when there is none."""
    from ..core.reader import DatasetReader

    return DatasetReader(root, storage_options=storage_options(endpoint_url))


def engine_command() -> AbstractContextManager[None]:
    """A block where the imports of the Spark engine fail with the extra to install."""
    ctx = click.get_current_context(silent=True)
    return needs_extra(ctx.command_path if ctx else "this command")


def open_dataset(root: str, endpoint_url: str | None) -> RevisionedDataset:
    """The dataset at ``root`` in the Spark engine, read-only (opening never writes);
    refused when there is none."""
    with engine_command():
        from ..core.dataset import RevisionedDataset

    ds = RevisionedDataset(root, read_only=True, storage_options=storage_options(endpoint_url))
    if ds.snapshot(refresh=False).head_sequence == 0:  # the original layout is refused on open
        raise not_a_dataset(ds.storage)
    return ds


def parse_time(value: str | None, option: str) -> datetime | None:
    """A time with an offset (``2020-01-03T00:00:00Z``); naive times are refused."""
    return None if value is None else to_utc(value, option)


def parse_point(value: str | None, option: str) -> int | datetime | None:
    """A sequence number (digits) or a time with an offset."""
    if value is None:
        return None
    return int(value) if value.isdigit() else to_utc(value, option)


def parse_position(value: str | None) -> int | str | None:
    """``--at``: HEAD, HEAD~n, a sequence number or a revision name."""
    if value is None:
        return None
    return int(value) if value.isdigit() else value


def split_columns(values: Sequence[str]) -> list[str]:
    """``--id-columns a,b`` and ``--id-columns a --id-columns b`` alike."""
    return [c.strip() for v in values for c in v.split(",") if c.strip()]


def start_spark(ds: RevisionedDataset, endpoint_url: str | None) -> SparkSession:
    """The session the reads of ``ds`` use: the running one, or a new one (s3a for S3)."""
    with engine_command():
        from pyspark.sql import SparkSession

        from ..core.spark_session import build_spark_session, quiet_log4j_config
        from ..s3a import apply_s3a_conf, s3a_conf

    location = urlparse(ds.storage.spark_uri())
    session = SparkSession.getActiveSession()
    if session is None:
        conf = {"spark.ui.enabled": "false"}
        if not debugging():
            # fatal only: a failed job logs errors with the stack trace of every task (5 to
            # 50 KB) that reach the user as the command's own one-line error (``--debug``
            # shows the JVM's log)
            quiet = quiet_log4j_config("fatal").as_uri()
            conf["spark.driver.extraJavaOptions"] = f"-Dlog4j2.configurationFile={quiet}"
        if location.scheme == "s3a":
            conf.update(s3a_conf(endpoint_url=endpoint_url))
        with nullcontext() if debugging() else jvm_start_lines_dropped():
            session = build_spark_session(app_name="revisions-cli", conf=conf)
    elif location.scheme == "s3a":  # a session that is already up: point s3a at the endpoint
        apply_s3a_conf(session, s3a_conf(endpoint_url=endpoint_url, jars="none"), location.netloc)
    return session


#: what a starting JVM prints on stderr whatever its log configuration: Spark's launcher
#: always adds an incubator module, and the JVM announces it
JVM_START_LINES = ("WARNING: Using incubator modules:",)


@contextmanager
def jvm_start_lines_dropped() -> Iterator[None]:
    """A block whose child processes (the JVM PySpark launches) get a pipe as stderr: a
    thread forwards its lines to this process's stderr, but for ``JVM_START_LINES``. The
    block's own stderr is this process's again when it ends."""
    sys.stderr.flush()
    read_end, write_end = os.pipe()
    stderr = os.dup(2)
    os.dup2(write_end, 2)
    os.close(write_end)
    try:
        yield
    finally:
        os.dup2(stderr, 2)
        threading.Thread(target=_forward, args=(read_end, stderr), daemon=True).start()


def _forward(read_end: int, stderr: int) -> None:
    """Copy the JVM's stderr lines to ``stderr`` until it exits, dropping its start lines."""
    with open(read_end, "rb") as lines, open(stderr, "wb", buffering=0) as out:
        for line in lines:
            if not line.decode(errors="replace").startswith(JVM_START_LINES):
                out.write(line)
