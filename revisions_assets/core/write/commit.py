"""A commit's arguments, checked against the log and made into a ``CommitRequest``
(docs/guides/engine.md, docs/guides/versions.md): id columns and schemas per table, field
versions, and what a carrying major carries or a skip-unchanged minor replaces. The
transaction then writes and appends it.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from pyspark.sql import DataFrame

from ..arguments import (
    check_bool,
    check_sequence_number,
    check_string_map,
    check_text,
    check_type,
    check_version,
)
from ..columns import DELETED
from ..errors import (
    ArgumentTypeError,
    InvalidArgumentError,
    NoMajorRevisionError,
    RetentionError,
    SchemaMismatchError,
)
from ..log.records import UpstreamPosition
from ..log.revision_log import RevisionLog
from ..read.execute.changes import state_hashes
from ..read.execute.files import FileGate
from ..read.execute.spark import SparkExecutor, state_schemas
from ..read.plan.requests import plan_state
from ..read.plan.scans import MergePlan
from ..read.plan.schema import value_columns
from ..read.scan import DatasetSnapshot
from ..timeutil import TimeLike, to_utc
from ..uris import describe
from .file_size import rows_per_file
from .rules import check_carried
from .transaction import (
    CommitRequest,
    StagedTable,
    check_against_log,
    complete_for_tombstones,
    table_id_columns,
)
from .validation import check_compatible, check_name, data_schema


class CommitPlanner:
    """Plans the commits of one dataset handle: its log, its executor and file gate (for the
    states a carrying major or a skip-unchanged minor compares with, read as any state
    read is: ``read/plan/requests.py``), and its id columns."""

    def __init__(
        self,
        revision_log: RevisionLog,
        executor: SparkExecutor,
        gate: FileGate,
        declared: Mapping[str, tuple[str, ...]] | None,
        default_ids: tuple[str, ...] | None,
    ):
        self._log = revision_log
        self._executor = executor
        self._gate = gate
        self._declared = declared
        self._default_ids = default_ids

    def plan(
        self,
        tables: Mapping[str, DataFrame],
        timestamp: TimeLike,
        is_major: bool,
        version: str | Mapping[str, str] | None,
        name: str | None,
        *,
        producer: Mapping[str, str] | None = None,
        upstream: Sequence[UpstreamPosition] = (),
        expected_positions: Mapping[tuple[str, str], int] | None = None,
        properties: Mapping[str, str] | None = None,
        field_versions: Mapping[str, Mapping[str, str]] | None = None,
        carry: bool = False,
        skip: bool = False,
        digit_name: bool = False,
        imported_after: int | None = None,
    ) -> CommitRequest:
        """The checked request of one commit: every argument checked against the log's state.
        ``imported_after``: a revision of an import, whose previous entry is that sequence
        (``CommitRequest.imported_after``)."""
        for table in tables:
            check_name(table, "table")
        check_version(version, tables)
        custom = name is not None
        request = CommitRequest(
            name=check_name(name, "revision", digits=digit_name) if custom else uuid.uuid4().hex,
            custom_name=custom,
            timestamp=to_utc(timestamp, "timestamp"),
            is_major=check_bool(is_major, "is_major"),
            version=version if isinstance(version, str) or version is None else None,
            producer=check_string_map(producer, "producer"),
            upstream=check_upstream(upstream),
            expected_positions=check_expected_positions(expected_positions),
            properties=check_string_map(properties, "properties"),
            imported_after=imported_after,
        )
        records = self._log.refresh()
        snapshot = self._snapshot()
        view = snapshot.view
        for table, df in tables.items():
            ids = table_id_columns(
                records, table, self._declared, self._default_ids, self._log.storage.uri
            )
            schema = data_schema(table, df.schema, ids)
            table_version = version.get(table) if isinstance(version, Mapping) else version
            staged = StagedTable(table, ids, schema, table_version)
            written = view.table_revisions(table) if table in view.tables() else []
            staged.rows_per_file = rows_per_file(written, table)
            if not request.is_major and DELETED in df.columns:
                complete_for_tombstones(snapshot, staged)
            request.staged.append(staged)
        check_against_log(view, request, self._log.storage.uri)
        unknown = sorted(set(field_versions or {}) - set(tables))
        if unknown:
            raise InvalidArgumentError(
                f"field_versions names table(s) {unknown}, which this commit does not write "
                f"(tables: {sorted(tables)})"
            )
        for staged in request.staged:
            staged.field_versions = _field_versions(staged, field_versions)
        if check_bool(carry, "carry") and not request.is_major:
            raise InvalidArgumentError(
                "carry=True is for majors (is_major=True): a minor keeps the state anyway"
            )
        if request.is_major and (carry or skip):
            for staged in request.staged:
                self.carry(staged, request.timestamp, tables[staged.table], carry, skip)
        elif skip:
            for staged in request.staged:
                staged.replaced = self.replaced_hashes(staged.table, request.timestamp)
                staged.compared_with = self._log.head
        return request

    def carry(
        self, staged: StagedTable, timestamp: datetime, df: DataFrame, required: bool, skip: bool
    ) -> None:
        """Make ``staged`` a carrying major of the state as of ``timestamp``, if it can be:
        ``required`` (``carry=True``) raises where a complete major would be written."""
        snapshot = self._snapshot()
        view, table = snapshot.view, staged.table
        if table not in view.tables():
            if required:
                raise NoMajorRevisionError(
                    f"carry=True: table {table!r} has no state to carry; commit a complete "
                    "major first"
                )
            return
        try:
            state = plan_state(snapshot, table, as_of=timestamp)
            if required and DELETED in df.columns:
                complete_for_tombstones(snapshot, staged)
            # the carried rows must read as rows of the new state: it keeps every column
            _major, current = state_schemas(snapshot, table)
            check_compatible(table, major=current, current=current, new=staged.schema)
            carries = tuple(r.sequence for r in state.selection.merge)
            check_carried(view, table, timestamp, carries)
        except (NoMajorRevisionError, RetentionError, SchemaMismatchError):
            if required:
                raise
            return  # nothing to carry: the major is written complete
        staged.carries = carries
        staged.compared_with = self._log.head
        staged.complete_offer = not required
        staged.replaced = self._hashes(state.rows) if skip or not required else None

    def replaced_hashes(self, table: str, timestamp: datetime) -> DataFrame | None:
        """The (ids, ``_row_hash``) of the rows a minor stamped ``timestamp`` replaces: the
        state as of its timestamp (the rows its own would follow in key order); None when
        there is none (no major by then, or its files are gone)."""
        try:
            plan = plan_state(self._snapshot(), table, as_of=timestamp).rows
        except (NoMajorRevisionError, RetentionError):
            return None
        return self._hashes(plan)

    def _snapshot(self) -> DatasetSnapshot:
        """The log as this planner last read it: what a commit's states are planned on, as
        state reads plan them."""
        return DatasetSnapshot(self._log.storage.uri, self._log.view())

    def _hashes(self, plan: MergePlan) -> DataFrame:
        """The (ids, ``_row_hash``) of the state ``plan`` reads, its files gated first."""
        self._gate.check(plan.table, plan.scanned)
        return state_hashes(self._executor, plan)


def _field_versions(
    staged: StagedTable, given: Mapping[str, Mapping[str, str]] | None
) -> dict[str, str] | None:
    """The field versions of one table of a commit, checked against its value columns."""
    if given is None or staged.table not in given:
        return None
    what = f"field_versions[{staged.table!r}]"
    versions = check_string_map(given[staged.table], what)
    values = value_columns(staged.schema, staged.id_columns)
    unknown = sorted(set(versions) - set(values))
    if unknown:
        raise InvalidArgumentError(
            f"{what} names {unknown}, not value columns of the data; they are {values}"
        )
    return versions


def check_upstream(upstream: Any) -> tuple[UpstreamPosition, ...]:
    """A list of ``UpstreamPosition`` with text addresses and sequence numbers."""
    if isinstance(upstream, (str, bytes, Mapping)) or not isinstance(upstream, Sequence):
        raise ArgumentTypeError(
            f"upstream must be a list of UpstreamPosition, got {describe(upstream)}"
        )
    for position in upstream:
        check_type(position, UpstreamPosition, "an item of upstream", "an UpstreamPosition")
        check_text(position.dataset, "UpstreamPosition.dataset")
        check_text(position.table, "UpstreamPosition.table")
        check_sequence_number(position.sequence, f"the upstream position in {position.key}")
    return tuple(upstream)


def check_expected_positions(value: Any) -> dict[tuple[str, str], int]:
    """``{(upstream dataset, table): sequence}`` the consumer started from."""
    if value is None:
        return {}
    check_type(value, Mapping, "expected_positions", "a dict {(dataset, table): sequence}")
    out = {}
    for key, sequence in value.items():
        if not (isinstance(key, tuple) and len(key) == 2 and all(isinstance(k, str) for k in key)):
            raise ArgumentTypeError(
                f"expected_positions keys must be (dataset, table) pairs of strings, "
                f"got {describe(key)}"
            )
        out[key] = check_sequence_number(sequence, f"expected_positions[{key!r}]")
    return out


__all__ = ["CommitPlanner"]
