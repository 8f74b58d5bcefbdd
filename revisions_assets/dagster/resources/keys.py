"""The resource keys of the revisions layer, namespaced so that a project's own resources
(a ``spark`` resource of ``dagster_pyspark``, an ``io_manager``) never collide with them
(docs/reference/dagster.md#resource-keys).

A revisioned asset and its checks find the location and the Spark session through the
asset's IO manager (the key its ``io_manager_key`` names); sensors take the location, and
jobs and your own assets the Spark session, under the keys below.
"""

IO_MANAGER_KEY = "revisions_io_manager"
LOCATION_KEY = "revisions_location"
SPARK_KEY = "revisions_spark"  # formerly "spark", now free for a project's own

#: a sensor tag: what a sensor of the layer requests of the assets it targets ("checks": only
#: their checks, so it never requests a scoring run, and a refused one does not name it)
SENSOR_REQUESTS_TAG = "revisions/requests"
