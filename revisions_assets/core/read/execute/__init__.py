"""Running read plans: the Spark and Polars executors and what they share."""
