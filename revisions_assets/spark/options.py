"""The options of ``format("revisions")``, read once: Spark hands a data source its options as
text (``.option(name, value)``, SQL's ``OPTIONS (name 'value')``, names in any case); here
they become the engine's ``ReadRequest`` (the same read, checked by the same rules, refused
with the same errors as ``RevisionedDataset.read/changes/history``) and the source's own
settings (where the dataset is, how a stream starts and follows).

Engine-free and Spark-free: a pure function of the options, tested without a JVM.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from ..core.errors import InvalidArgumentError
from ..core.read.plan.requests import ReadKind, ReadRequest

#: what each option of a read means (names are case-insensitive, as every Spark option)
READ_OPTIONS: dict[str, str] = {
    "path": "the dataset's root (what load(root) sets): a local path, file:// or s3:// URI",
    "table": "the table to read (required)",
    "as_of": "the state as of a logical time (an ISO time with an offset)",
    "known_at": "as known at a commit time: only the revisions committed by then",
    "at": "pinned at a position: HEAD, HEAD~n, a revision name or a sequence number",
    "columns": "only these columns, comma-separated (the id columns always come first)",
    "with_revision": (
        "true: each row's _revision, _revision_timestamp, _revision_sequence (the default "
        "of a change read)"
    ),
    "changes": "true: a change read (the rows with _deleted and _reset)",
    "history": "true: the SCD2 history (valid_from, valid_to, is_current, is_deleted)",
    "since": "a change read's or a history's start (exclusive), a logical time",
    "until": "a change read's or a history's end (inclusive), a logical time",
    "since_sequence": "a change read since this sequence (a consumer's position)",
    "until_sequence": "a change read up to this sequence (the head by default)",
    "only_changed": "true: only the entities whose values changed (a change read)",
    "compared_columns": (
        "the columns whose changes count in a change read, comma-separated (every value "
        "column by default)"
    ),
    "partitions": "how many Spark partitions the read splits into (default: by size)",
}
#: what each option of a change feed (``readStream``) means
STREAM_OPTIONS: dict[str, str] = {
    "startingposition": (
        "where a new query starts: bootstrap (the default: the state at the head as one "
        "reset, then each revision's changes), latest (only revisions committed from now "
        "on), or a position (HEAD~n, a revision name, a sequence): the changes after it"
    ),
    "maxrevisionspertrigger": "at most this many revisions of the table per micro-batch",
    "onmajor": (
        "what a major (a reset) does to a running query: reset (the default: the batch "
        "replays the new state, every row with _reset true) or fail (the query stops)"
    ),
}
#: the prefix of the options that configure S3 access (``storage.endpoint_url``, ...)
STORAGE_PREFIX = "storage."
#: the options that make a read a change read or a history
_KINDS: dict[str, ReadKind] = {"changes": "changes", "history": "history"}
#: how each stream option is spelled in the docs (Spark lowercases the names)
STREAM_SPELLING = {
    "startingposition": "startingPosition",
    "maxrevisionspertrigger": "maxRevisionsPerTrigger",
    "onmajor": "onMajor",
}

OnMajor = Literal["reset", "fail"]
#: ``startingPosition`` values that are not positions
BOOTSTRAP, LATEST = "bootstrap", "latest"


@dataclass(frozen=True)
class StreamOptions:
    """How a change feed starts and follows (``readStream``)."""

    starting_position: str = BOOTSTRAP
    max_revisions: int | None = None
    on_major: OnMajor = "reset"
    #: the stream options given (refused by a batch read)
    given: tuple[str, ...] = ()


@dataclass(frozen=True)
class SourceOptions:
    """A read of ``format("revisions")`` as its options ask for it."""

    root: str
    table: str | None
    request: ReadRequest | None
    storage_options: dict[str, str] = field(default_factory=dict)
    partitions: int | None = None
    stream: StreamOptions = StreamOptions()

    @property
    def kind(self) -> ReadKind:
        return self.request.kind if self.request is not None else "state"

    def read_request(self) -> ReadRequest:
        """The engine's request, or the refusal of a read without a table."""
        if self.request is None:
            raise InvalidArgumentError(
                f'format("revisions") of {self.root}: give the table to read, '
                ".option(\"table\", name) (OPTIONS (table 'name') in SQL)"
            )
        return self.request


def parse_options(options: Mapping[str, str]) -> SourceOptions:
    """The read ``options`` ask for; InvalidArgumentError (or the engine's own refusal of the
    request) naming the option and how to give it."""
    given = {str(k).lower(): v for k, v in options.items()}
    storage = {
        k[len(STORAGE_PREFIX) :]: v for k, v in given.items() if k.startswith(STORAGE_PREFIX)
    }
    unknown = sorted(
        k
        for k in given
        if k not in READ_OPTIONS and k not in STREAM_OPTIONS and not k.startswith(STORAGE_PREFIX)
    )
    if unknown:
        known = [*READ_OPTIONS, *STREAM_SPELLING.values(), f"{STORAGE_PREFIX}<S3 option>"]
        raise InvalidArgumentError(
            f'format("revisions"): unknown options {unknown}; its options are {known}'
        )
    root = given.get("path")
    if not root:
        raise InvalidArgumentError(
            'format("revisions") needs the dataset\'s root: load(root), or the option path '
            "(OPTIONS (path '...') in SQL)"
        )
    kinds = [k for k in _KINDS if _flag(given, k)]
    if len(kinds) > 1:
        raise InvalidArgumentError(
            f'format("revisions"): give one of the options {kinds}, not both: a read is a '
            "state (neither), a change read (changes) or a history (history)"
        )
    table = given.get("table")
    request = None
    if table is not None:
        columns, compared = given.get("columns"), given.get("compared_columns")
        kind = _KINDS[kinds[0]] if kinds else "state"
        options = {
            "as_of": given.get("as_of"),
            "at": given.get("at"),
            "known_at": given.get("known_at"),
            "columns": _names(columns) if columns is not None else None,
            # a change read through Spark names each row's revision unless told not to: what
            # a change feed's consumers order and deduplicate by
            "with_revision": _flag(given, "with_revision", default=kind == "changes"),
            "since": given.get("since"),
            "until": given.get("until"),
            "since_sequence": _number(given, "since_sequence", minimum=0),
            "until_sequence": _number(given, "until_sequence", minimum=0),
            "only_changed": _flag(given, "only_changed"),
            "compared_columns": _names(compared) if compared is not None else None,
        }
        try:
            request = ReadRequest(table, kind, **options)
        except InvalidArgumentError as exc:  # the engine's refusal, told as options
            raise type(exc)(f'format("revisions") options: {exc}') from exc
    return SourceOptions(
        root=root,
        table=table,
        request=request,
        storage_options=storage,
        partitions=_number(given, "partitions", minimum=1),
        stream=_stream_options(given),
    )


def _stream_options(given: Mapping[str, str]) -> StreamOptions:
    start = given.get("startingposition", BOOTSTRAP).strip()
    if not start:
        raise InvalidArgumentError(
            "option startingPosition is empty: give bootstrap, latest, HEAD~n, a revision "
            "name or a sequence number"
        )
    on_major = given.get("onmajor", "reset").strip().lower()
    if on_major not in ("reset", "fail"):
        raise InvalidArgumentError(
            f"option onMajor must be reset or fail, got {given['onmajor']!r}: "
            + STREAM_OPTIONS["onmajor"]
        )
    return StreamOptions(
        starting_position=start.lower() if start.lower() in (BOOTSTRAP, LATEST) else start,
        max_revisions=_number(given, "maxrevisionspertrigger", minimum=1),
        on_major=on_major,  # type: ignore[arg-type]
        given=tuple(STREAM_SPELLING[k] for k in STREAM_OPTIONS if k in given),
    )


def _flag(given: Mapping[str, str], name: str, default: bool = False) -> bool:
    value = given.get(name)
    if value is None:
        return default
    text = value.strip().lower()
    if text not in ("true", "false"):
        raise InvalidArgumentError(f"option {name} must be true or false, got {value!r}")
    return text == "true"


def _number(given: Mapping[str, str], name: str, *, minimum: int) -> int | None:
    value = given.get(name)
    if value is None:
        return None
    text = value.strip()
    if not (text.isascii() and text.isdigit()) or int(text) < minimum:
        spelled = STREAM_SPELLING.get(name, name)
        raise InvalidArgumentError(
            f"option {spelled} must be a whole number >= {minimum}, got {value!r}"
        )
    return int(text)


def _names(text: str) -> tuple[str, ...]:
    names = tuple(n.strip() for n in text.split(","))
    if not all(names):
        raise InvalidArgumentError(
            f"option columns must name columns separated by commas, got {text!r}"
        )
    return names
