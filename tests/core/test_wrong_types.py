"""Random wrong-typed arguments thrown at every public entry point of the engine: only
RevisionsError subclasses come out (never a TypeError, AttributeError or a Py4J error).

Each example replaces one argument of an otherwise valid call by a value of a type that
argument does not accept. Calls whose other arguments are valid would commit or read, so
commits are made to fail late (their table lacks its id column) and reads stop at the
wrong argument before Spark does any work.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any

import pandas as pd
import pytest
from harness.dates import day
from harness.examples import examples
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from revisions_assets import RevisionedDataset
from revisions_assets.core.errors import CorruptLogError, RevisionsError
from revisions_assets.core.log.health import parse_entry
from revisions_assets.core.maintain.verify import verify
from revisions_assets.core.spark_session import build_spark_session
from revisions_assets.core.storage import backends
from revisions_assets.core.storage.backends import configure_storage, open_storage
from revisions_assets.core.timeutil import to_utc
from revisions_assets.s3a import s3a_conf

from .damage import TABLE, copy_dataset
from .helpers import frame

# values of every kind; each argument draws from those it does not accept
ANY_VALUE = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**20), max_value=10**20),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=8),
    st.binary(max_size=8),
    st.lists(st.integers(), max_size=3),
    st.tuples(st.integers(), st.text(max_size=3)),
    st.dictionaries(st.integers(), st.integers(), max_size=2),
    st.dictionaries(st.text(max_size=3), st.integers(), min_size=1, max_size=2),
    st.sets(st.integers(), max_size=2),
    st.datetimes(),  # naive
    st.dates(),
    st.decimals(allow_nan=True),
    st.complex_numbers(),
    st.sampled_from([pd.NaT, pd.DataFrame({"id": [1]}), object(), math.nan, Decimal("1.5")]),
)


def is_text(v: Any) -> bool:
    return isinstance(v, str)


def is_optional_text(v: Any) -> bool:
    return v is None or isinstance(v, str)


def is_aware_time(v: Any) -> bool:
    return isinstance(v, datetime) and v is not pd.NaT and v.tzinfo is not None


def is_optional_time(v: Any) -> bool:
    return v is None or is_aware_time(v)


def is_sequence_number(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= 0


def is_optional_sequence(v: Any) -> bool:
    return v is None or is_sequence_number(v)


def is_position(v: Any) -> bool:
    return v is None or isinstance(v, str) or is_sequence_number(v)


def is_root(v: Any) -> bool:
    return isinstance(v, (str, os.PathLike))


def is_string_map(v: Any) -> bool:
    return v is None or (
        isinstance(v, Mapping) and all(is_text(k) and is_optional_text(x) for k, x in v.items())
    )


def is_spark_conf(v: Any) -> bool:
    return v is None or (
        isinstance(v, Mapping)
        and all(is_text(k) and isinstance(x, (str, int, float, bool)) for k, x in v.items())
    )


def accepts_nothing(v: Any) -> bool:
    return False


@dataclass(frozen=True)
class Entry:
    """One public callable: its valid arguments and which values each argument accepts
    (the values drawn for it are the others)."""

    name: str
    call: Callable[..., Any]
    valid: dict[str, Any]
    accepts: dict[str, Callable[[Any], bool]]


def entries(ds: RevisionedDataset, spark, root: str) -> list[Entry]:
    no_id = frame(spark, [("x",)], "v string")  # fails late: the table lacks its id column
    return [
        Entry(
            "RevisionedDataset",
            RevisionedDataset,
            {"root": root, "spark": spark, "id_columns": ["id"], "merge_strategy": "auto"},
            {
                "root": is_root,
                "spark": lambda v: v is None,
                "id_columns": lambda v: (
                    v is None
                    or isinstance(v, str)
                    or (
                        isinstance(v, Sequence)
                        and not isinstance(v, bytes)
                        and all(map(is_text, v))
                    )
                ),
                "merge_strategy": lambda v: (
                    isinstance(v, str) and v in ("auto", "broadcast", "window")
                ),
                "storage_options": lambda v: v is None or (isinstance(v, Mapping) and not v),
            },
        ),
        Entry(
            "commit",
            ds.commit,
            {"tables": {TABLE: no_id}, "timestamp": day(5), "is_major": False},
            {
                "tables": accepts_nothing,
                "timestamp": lambda v: isinstance(v, str) or is_aware_time(v),
                "is_major": lambda v: isinstance(v, bool),
                "version": is_optional_text,
                "name": lambda v: v is None,
                "producer": is_string_map,
                "upstream": lambda v: isinstance(v, (list, tuple)) and not v,
                "expected_positions": lambda v: v is None or (isinstance(v, Mapping) and not v),
                "properties": is_string_map,
            },
        ),
        Entry(
            "read",
            ds.read,
            {"table": TABLE, "at": "nope"},
            {
                "table": accepts_nothing,
                "as_of": is_optional_time,
                "at": is_position,
                "with_revision": lambda v: isinstance(v, bool),
            },
        ),
        Entry(
            "changes",
            ds.changes,
            {"table": TABLE, "since_sequence": 1, "until_sequence": 99},
            {
                "table": accepts_nothing,
                "since": lambda v: v is None,
                "until": lambda v: v is None,
                "since_sequence": is_optional_sequence,
                "until_sequence": is_optional_sequence,
                "at": lambda v: v is None,
                "with_revision": lambda v: isinstance(v, bool),
            },
        ),
        Entry("revision", ds.revision, {"ref": "nope"}, {"ref": is_position}),
        Entry("revisions", ds.revisions, {"table": "nope"}, {"table": is_optional_text}),
        Entry(
            "upstream_position",
            ds.upstream_position,
            {"dataset": "up", "table": "t", "consumer_table": 5},
            {"dataset": is_text, "table": is_text, "consumer_table": is_optional_text},
        ),
        Entry("open_storage", open_storage, {"root": None}, {"root": is_root}),
        Entry("configure_storage", configure_storage, {"prefix": None}, {"prefix": is_text}),
        Entry(
            "to_utc",
            to_utc,
            {"value": None},
            {"value": lambda v: isinstance(v, str) or is_aware_time(v), "what": accepts_nothing},
        ),
        Entry("verify", verify, {"root": None}, {"root": is_root}),
        Entry(
            "build_spark_session",
            build_spark_session,
            {},
            {
                "master": is_optional_text,
                "remote": is_optional_text,
                "app_name": is_text,
                "conf": is_spark_conf,
            },
        ),
        Entry(
            "s3a_conf",
            s3a_conf,
            {"jars": "none"},
            {
                "endpoint_url": is_optional_text,
                "aws_secret_access_key": is_optional_text,
                "path_style": lambda v: v is None or isinstance(v, bool),
                "jars": lambda v: isinstance(v, str) and v in ("classpath", "ship", "none"),
            },
        ),
    ]


@pytest.fixture(scope="module")
def dataset(template, spark, tmp_path_factory):
    root = copy_dataset(template, tmp_path_factory.mktemp("wrong-types") / "dataset")
    return RevisionedDataset(str(root), spark=spark, id_columns=["id"])


@pytest.fixture(scope="module")
def public_callables(dataset, spark):
    return entries(dataset, spark, dataset.root)


@settings(max_examples=examples(300), deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_wrong_types_raise_only_revisions_errors(dataset, public_callables, data):
    entry = data.draw(st.sampled_from(public_callables), label="callable")
    argument = data.draw(st.sampled_from(sorted(entry.accepts)), label="argument")
    value = data.draw(ANY_VALUE.filter(lambda v: not entry.accepts[argument](v)), label="value")
    kwargs = {**entry.valid, argument: value}
    configured = dict(backends._CONFIGURED)
    try:
        entry.call(**kwargs)
    except RevisionsError:
        pass
    except Exception as exc:  # pragma: no cover - the failure this test exists for
        pytest.fail(f"{entry.name}({argument}={value!r}) raised {type(exc).__name__}: {exc}")
    else:
        pytest.fail(f"{entry.name}({argument}={value!r}) was accepted")
    finally:
        backends._CONFIGURED.clear()
        backends._CONFIGURED.update(configured)
    assert [r.name for r in dataset.revisions()] == ["r1", "r2", "r3"]


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)


@settings(max_examples=examples(200), deadline=None)
@given(
    doc=st.one_of(
        JSON,
        st.fixed_dictionaries(
            {
                "name": JSON,
                "timestamp_us": JSON,
                "is_major": JSON,
                "sequence": st.just(1) | JSON,
                "committed_at_us": JSON,
                "tables": st.dictionaries(st.text(max_size=4), JSON, max_size=2),
            }
        ),
    ),
    raw=st.binary(max_size=30),
)
def test_log_entries_of_any_shape_are_corrupt_log_errors(doc, raw):
    for content in (json.dumps(doc).encode(), raw):
        try:
            record = parse_entry(content, 1, "/data/x")
        except CorruptLogError as exc:
            assert "00000000000000000001.json" in str(exc)
        else:  # only a complete, well-typed entry is accepted
            assert record.sequence == 1 and isinstance(record.is_major, bool)
