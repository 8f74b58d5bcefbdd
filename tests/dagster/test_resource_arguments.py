"""Issue 12: the public methods of the Dagster resources that take plain values refuse wrong
types and out-of-range values with a RevisionsError subclass, never a bare Python error.
Pure (no Spark, no run): ``DatasetLocation.root_for`` and ``read_log`` on any value."""

from __future__ import annotations

import tempfile

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from resources import DatasetLocation
from revisions_assets.core.errors import RevisionsError

pytestmark = pytest.mark.dagster

BASE = tempfile.mkdtemp(prefix="resource-arguments-")

#: anything a caller could pass as a dataset name: wrong types, empty, escaping, odd text
DATASET_NAMES = st.one_of(
    st.none(),
    st.integers(),
    st.floats(allow_nan=True),
    st.binary(max_size=8),
    st.lists(st.text(max_size=3), max_size=2),
    st.sampled_from(["", "..", "../x", "a/../../b", "a\\b", "a\0b", "c:x", "/"]),
    st.text(max_size=12),
)


@settings(max_examples=60, deadline=None)
@given(dataset=DATASET_NAMES, method=st.sampled_from(["root_for", "read_log"]))
def test_dataset_names_are_checked(dataset, method):
    location = DatasetLocation(base_uri=BASE)
    try:
        result = getattr(location, method)(dataset)
    except RevisionsError as error:
        assert "dataset" in str(error) or repr(dataset) in str(error)  # names what is wrong
        return
    # accepted: a relative name stays under base_uri, a URI or absolute path is used as is
    if method == "root_for" and isinstance(dataset, str) and not dataset.startswith("/"):
        assert "://" in dataset or result.startswith(BASE + "/")
