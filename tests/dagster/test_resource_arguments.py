"""The Dagster resources' public methods refuse wrong-typed or out-of-range arguments with a
RevisionsError subclass (or, for resource fields, Dagster's own config validation), never a
raw TypeError/AttributeError from deep inside."""

from __future__ import annotations

import dagster as dg
import pydantic
import pytest
from harness.examples import examples
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from revisions_assets.core.errors import PathEscapeError, RevisionsError
from revisions_assets.dagster import DatasetLocation, RevisionsIOManager, SparkSessionResource

pytestmark = pytest.mark.dagster

#: values of the wrong type for a string, a session, a mapping or a context
WRONG = st.one_of(
    st.none(),
    st.integers(),
    st.floats(allow_nan=True),
    st.booleans(),
    st.binary(max_size=8),
    st.lists(st.integers(), max_size=3),
    st.dictionaries(st.integers(), st.integers(), max_size=2),
    st.builds(object),
)
NOT_TEXT = WRONG.filter(lambda v: v is not None)
FAST = settings(
    max_examples=examples(40),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)


@pytest.fixture
def location(tmp_path) -> DatasetLocation:
    return DatasetLocation(base_uri=str(tmp_path))


@FAST
@given(dataset=NOT_TEXT)
def test_location_dataset_names(location, dataset):
    for call in (location.root_for, location.read_log, location.read_view):
        with pytest.raises(RevisionsError, match="dataset"):
            call(dataset)
    with pytest.raises(RevisionsError, match="dataset"):
        location.dataset(dataset, None)


@pytest.mark.parametrize("blank", ["", "   "])
def test_location_blank_dataset(location, blank):
    with pytest.raises(RevisionsError, match="dataset must name a dataset"):
        location.root_for(blank)


@pytest.mark.parametrize("escaping", ["../x", "a/../../x"])
def test_location_relative_names_stay_under_the_base(location, escaping):
    with pytest.raises(PathEscapeError, match="not confined"):
        location.root_for(escaping)


@FAST
@given(spark=NOT_TEXT)
def test_location_sessions(location, spark):
    with pytest.raises(RevisionsError, match="spark"):
        location.dataset("d", spark)
    with pytest.raises(RevisionsError, match="spark|read_state"):
        location.read_state(spark, "d", "t")
    with pytest.raises(RevisionsError, match="read_state needs a SparkSession"):
        location.read_state(None, "d", "t")


@FAST
@given(
    writes=st.one_of(
        NOT_TEXT.filter(lambda v: not isinstance(v, dict) or v),
        st.dictionaries(st.text(min_size=1, max_size=3), WRONG, min_size=1, max_size=2),
        st.dictionaries(
            st.text(min_size=1, max_size=3), st.lists(NOT_TEXT, min_size=1, max_size=2), min_size=1
        ),
    )
)
def test_location_declared_writes(location, writes):
    with pytest.raises(RevisionsError, match="writes"):
        location.dataset("d", None, writes)


@FAST
@given(context=WRONG)
def test_io_manager_slice_for_needs_a_context(location, context):
    manager = RevisionsIOManager(location=location, spark=SparkSessionResource())
    with pytest.raises(RevisionsError, match="slice_for needs"):
        manager.slice_for(context)


@pytest.mark.parametrize(
    "build",
    [
        lambda: DatasetLocation(base_uri=123),
        lambda: DatasetLocation(base_uri="/x", compact_after="often"),
        lambda: SparkSessionResource(spark_config=["a"]),
        lambda: SparkSessionResource(master=1.5),
    ],
)
def test_resource_fields_are_validated_by_dagster_config(build):
    with pytest.raises((pydantic.ValidationError, dg.DagsterInvalidConfigError)):
        build()
