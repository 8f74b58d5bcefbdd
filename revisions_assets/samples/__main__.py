"""``python -m revisions_assets.samples``: the maintainers rewrite the shipped samples with the
engine (the ``spark`` extra), after a change of the dataset format."""

from ..core.spark_session import build_spark_session
from . import HERE
from .writing import regenerate

regenerate(build_spark_session())
print(f"samples rewritten in {HERE}")
