"""The resource keys under which revisioned assets, checks and sensors find their resources."""

IO_MANAGER_KEY = "revisions_io_manager"
LOCATION_KEY = "revisions_location"
SPARK_KEY = "spark"
