"""The components of revisioned assets: the factories, declared from YAML (``defs.yaml``).

``FeaturizedAssetComponent``, ``ReferenceAssetComponent`` and ``ScoringAssetComponent`` are
``dg.Component`` + ``dg.Resolvable``: their attributes are what ``featurized_asset``,
``reference_asset`` and ``scoring_asset`` take, and ``build_defs`` calls those factories (one
implementation). ``dg scaffold defs revisions_assets.dagster.FeaturizedAssetComponent
my_features`` writes a ``defs.yaml`` and the Python functions it names.

- ``function`` (and a featurized asset's ``source``): ``file.py:name`` (a file of the
  component's folder) or ``package.module:name``;
- ``automation_condition``: a template, e.g. ``"{{ revisions_automation() }}"`` (also in
  scope: ``revisions_log_condition()``, Dagster's ``automation_condition``);
- ``base_uri``: the location of the datasets (a relative path is resolved against the
  project root, as ``revisions_resources`` resolves one). With a ``RevisionsResourcesComponent``
  in the project, the component runs on its resources (``base_uri`` must then name the same
  location, or be left out); without one, the component's Definitions carry the revisions
  resources on the default Spark settings, the same objects for the same location, so
  components and a project's ``revisions_resources(...)`` on one location merge (different
  settings fail with ``ResourceConflictError``, naming both). Without either, the project
  binds them. A component that knows its location shows a pending major
  (``pending.py``);
- ``check_schema`` (``file.py:name`` or ``module:name`` of a pandera.pyspark model) and a scoring
  asset's ``max_lag_revisions``/``max_lag_seconds``: what its ``revision_checks`` take;
- a scoring component names its inputs by the defs path of their components
  (``upstream: my_features``, ``references: {groups: {component: my_groups, join_on: {...}}}``);
  a path that names none fails with ``UnknownComponentError``, listing the project's.

A component brings what a project of factories adds around its assets: the asset's
``revision_checks``, the in-process executor (every component gives the same one, so their
Definitions merge) and, from the first revisioned component of the defs folder, the one
``revisions_automation_sensor`` over every component's asset with an automation condition
(a sensor's name is unique in a code location, and the log condition is evaluated in the
code server, which Dagster's default automation sensor does not do).
"""

import importlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Annotated, Any, TypeVar

import dagster as dg
from dagster.components.resolved.core_models import (
    DailyPartitionsDefinitionModel,
    HourlyPartitionsDefinitionModel,
    TimeWindowPartitionsDefinitionModel,
    WeeklyPartitionsDefinitionModel,
    resolve_partitions_def,
)
from dagster.components.scaffold.scaffold import ScaffoldRequest, scaffold_with

from revisions_assets.core.errors import RevisionsError

from ..automation import (
    built_location,
    revisions_automation,
    revisions_automation_sensor,
    revisions_log_condition,
)
from ..checks import revision_checks
from ..featurized import featurized_asset, reference_asset
from ..pending import mark_pending
from ..resources.keys import IO_MANAGER_KEY
from ..scoring import Reference, scoring_asset
from ..source_version import SourceVersion
from .resources import project_resources

PartitionsField = Annotated[
    dg.PartitionsDefinition,
    dg.Resolver(
        resolve_partitions_def,
        description="The time partitions of the asset (daily, hourly, weekly, time_window).",
        model_field_type=DailyPartitionsDefinitionModel
        | HourlyPartitionsDefinitionModel
        | WeeklyPartitionsDefinitionModel
        | TimeWindowPartitionsDefinitionModel,
    ),
]
ConditionField = Annotated[
    dg.AutomationCondition | None,
    dg.Resolver.default(
        model_field_type=str | None,
        description='e.g. "{{ revisions_automation() }}": when the asset runs by itself.',
    ),
]

VersionField = Annotated[
    str | SourceVersion,
    dg.Resolver.default(
        model_field_type=str,
        description='The code version: bump it to make the next run a major; or "{{ '
        "source_version() }}\": derived from the code of the asset's functions.",
    ),
]

FreshnessField = Annotated[
    dg.FreshnessPolicy | None,
    dg.Resolver.default(
        model_field_type=str | None,
        description="A template returning a FreshnessPolicy (as Dagster's asset specs take it), "
        'e.g. "{{ my_freshness_policy() }}" from a template_vars_module.',
    ),
]


_Component = TypeVar("_Component", bound=dg.Component)


def _function(context: dg.ComponentLoadContext, reference: str) -> Callable[..., Any]:
    """``file.py:name`` of the component's folder, or ``package.module:name``."""
    where, _, name = reference.partition(":")
    if not name:
        raise ValueError(f"function {reference!r}: expected 'file.py:name' or 'module:name'")
    if where.endswith(".py"):
        module = context.load_defs_relative_python_module(Path(where))
    else:
        module = importlib.import_module(where)
    return getattr(module, name)


def _keys(keys: Sequence[str] | None) -> list[dg.AssetKey]:
    return [dg.AssetKey.from_user_string(k) for k in keys or ()]


def _retry(max_retries: int | None) -> dg.RetryPolicy | None:
    return dg.RetryPolicy(max_retries=max_retries) if max_retries else None


@dataclass(kw_only=True)
class _RevisionedAsset(dg.Component, dg.Resolvable):
    """What the three factories share."""

    #: the asset's name (its key, under ``key_prefix``)
    name: str
    #: the asset's function: ``file.py:name`` (of the component's folder) or ``module:name``
    function: str
    #: the code version: bumping it makes a major (the automation requests it); or
    #: ``"{{ source_version() }}"``, derived from the code of the asset's functions
    code_version: VersionField
    #: the dataset (a folder under the location) and the table (default: the asset's name)
    dataset: str | None = None
    table: str | None = None
    key_prefix: list[str] | None = None
    description: str | None = None
    group_name: str | None = None
    owners: list[str] | None = None
    tags: dict[str, str] | None = None
    #: {column: Spark type}: the catalog's columns before the first run
    columns: dict[str, str] | None = None
    column_descriptions: dict[str, str] | None = None
    automation_condition: ConditionField = None
    freshness_policy: FreshnessField = None
    max_retries: int | None = None
    pool: str | None = None
    #: the datasets' location: when given, the Definitions carry the revisions resources
    base_uri: str | None = None
    #: the pandera.pyspark model or schema the checks validate: ``file.py:name`` or ``module:name``
    check_schema: str | None = None

    @classmethod
    def get_additional_scope(cls) -> Mapping[str, Any]:
        return {
            **super().get_additional_scope(),
            "revisions_automation": revisions_automation,
            "revisions_log_condition": revisions_log_condition,
            "source_version": SourceVersion,
        }

    def common(self) -> dict[str, Any]:
        """The factory arguments every component declares the same way."""
        return {
            "name": self.name,
            # a template renders '1' as 1: versions are strings (or derived from the code)
            "code_version": (
                self.code_version
                if isinstance(self.code_version, SourceVersion)
                else str(self.code_version)
            ),
            "dataset": self.dataset,
            "table": self.table,
            "key_prefix": self.key_prefix,
            "description": self.description,
            "group_name": self.group_name,
            "owners": self.owners,
            "tags": self.tags,
            "columns": self.columns,
            "column_descriptions": self.column_descriptions,
            "automation_condition": self.automation_condition,
            "freshness_policy": self.freshness_policy,
            "retry_policy": _retry(self.max_retries),
            "pool": self.pool,
        }

    def asset(self, context: dg.ComponentLoadContext) -> dg.AssetsDefinition:
        raise NotImplementedError

    def asset_key(self) -> dg.AssetKey:
        return dg.AssetKey([*(self.key_prefix or []), self.name])

    def check_options(self, context: dg.ComponentLoadContext) -> dict[str, Any]:
        """What ``revision_checks`` takes besides the asset."""
        schema = _function(context, self.check_schema) if self.check_schema else None
        return {"schema": schema}

    def build_defs(self, context: dg.ComponentLoadContext) -> dg.Definitions:
        resources, own = project_resources(context, self.name, self.base_uri)
        asset = self.asset(context)
        if resources is not None:  # the datasets' location is known: a pending major shows
            asset = mark_pending(asset, built_location(resources[IO_MANAGER_KEY], IO_MANAGER_KEY))
        return dg.Definitions(
            assets=[asset],
            asset_checks=revision_checks(asset, **self.check_options(context)),
            sensors=_automation_sensor(self, context),
            resources=dict(resources) if own and resources is not None else {},
            # one process, one JVM: a run's Spark work is not split across step processes
            executor=dg.in_process_executor,
        )


def _automation_sensor(
    component: _RevisionedAsset, context: dg.ComponentLoadContext
) -> list[dg.SensorDefinition]:
    """The project's ``revisions_automation_sensor``, from its first revisioned component
    (the others bring none): over the assets of every revisioned component that has an
    automation condition. A component built outside a defs folder brings its own."""
    found = context.component_tree.get_all_components(of_type=_RevisionedAsset)
    components = found if any(c is component for c in found) else [component]
    if components[0] is not component:
        return []
    keys = [c.asset_key() for c in components if c.automation_condition is not None]
    return [revisions_automation_sensor(dg.AssetSelection.assets(*keys))] if keys else []


class FeaturizedScaffolder(dg.Scaffolder):
    """A working featurized asset: ``defs.yaml`` and ``features.py`` (a source of a few rows
    per window, and the function computing the features)."""

    def scaffold(self, request: ScaffoldRequest) -> None:
        name = request.target_path.name
        dg.scaffold_component(
            request,
            {
                "name": name,
                "function": "features.py:featurize",
                "source": "features.py:source",
                "id_columns": ["entity"],
                "partitions": {"type": "daily", "start_date": "2024-01-01"},
                "code_version": "1",
                "dataset": name,
                "table": "features",
                "columns": {"entity": "string", "total": "bigint"},
                "base_uri": "datasets",
                "automation_condition": "{{ revisions_automation() }}",
            },
        )
        (request.target_path / "features.py").write_text(FEATURES_TEMPLATE)


FEATURES_TEMPLATE = '''"""The functions of a featurized asset (see defs.yaml): replace them."""

from datetime import datetime

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from revisions_assets.dagster import RunSlice


def source(spark: SparkSession, start: datetime, end: datetime) -> DataFrame:
    """The source rows of [start, end): here a few made-up events on the window's first day
    (entity a's values change with the day, b's do not)."""
    day = start.date()
    return spark.createDataFrame(
        [(day, "a", day.day), (day, "b", 2), (day, "a", 3)], "day date, entity string, value long"
    )


def featurize(rows: DataFrame, window: RunSlice) -> DataFrame:
    """The features of the entities the window's rows are about."""
    return rows.groupBy("entity").agg(F.sum("value").alias("total"))
'''


@scaffold_with(FeaturizedScaffolder)
@dataclass(kw_only=True)
class FeaturizedAssetComponent(_RevisionedAsset):
    """A time-partitioned featurized asset (``featurized_asset``): ``function(rows, window)``
    computes the features of the rows ``source(spark, start, end)`` returns for the window."""

    id_columns: list[str]
    #: the source rows of a window: ``(spark, start, end) -> DataFrame`` (none with ``pipes``)
    source: str | None = None
    #: the Spark work runs in a remote job launched with Dagster Pipes: ``function`` is then
    #: ``fn(context, job, **clients)`` (docs/guides/pipes.md)
    pipes: bool = False
    partitions: PartitionsField
    #: how far before the window the source is read (days)
    lookback_days: float = 0
    #: per-column versions (default: the code version)
    field_versions: dict[str, str] | None = None
    #: keys (``a/b``) of assets it reads besides revisioned ones (its sources)
    deps: list[str] | None = None

    def asset(self, context: dg.ComponentLoadContext) -> dg.AssetsDefinition:
        return featurized_asset(
            **self.common(),
            deps=_keys(self.deps),
            id_columns=self.id_columns,
            partitions_def=self.partitions,  # type: ignore[arg-type]
            source=_function(context, self.source) if self.source else None,
            lookback=timedelta(days=self.lookback_days),
            field_versions={k: str(v) for k, v in (self.field_versions or {}).items()} or None,
            pipes=self.pipes,
        )(_function(context, self.function))


class ReferenceScaffolder(dg.Scaffolder):
    """A working reference table: ``defs.yaml`` and ``snapshot.py``."""

    def scaffold(self, request: ScaffoldRequest) -> None:
        name = request.target_path.name
        dg.scaffold_component(
            request,
            {
                "name": name,
                "function": "snapshot.py:snapshot",
                "id_columns": ["entity"],
                "code_version": "1",
                "dataset": "reference",
                "columns": {"entity": "string", "weight": "double"},
                "base_uri": "datasets",
                "automation_condition": "{{ revisions_automation() }}",
            },
        )
        (request.target_path / "snapshot.py").write_text(SNAPSHOT_TEMPLATE)


SNAPSHOT_TEMPLATE = '''"""The function of a reference table (see defs.yaml): replace it."""

from pyspark.sql import DataFrame, SparkSession


def snapshot(spark: SparkSession) -> DataFrame:
    """The table's full current state (a run commits only what changed)."""
    return spark.createDataFrame([("a", 1.0), ("b", 2.0)], "entity string, weight double")
'''


@scaffold_with(ReferenceScaffolder)
@dataclass(kw_only=True)
class ReferenceAssetComponent(_RevisionedAsset):
    """An unpartitioned reference table (``reference_asset``): ``function(spark)`` returns
    its full snapshot."""

    id_columns: list[str]
    #: keys (``a/b``) of assets it reads (its sources)
    deps: list[str] | None = None

    def asset(self, context: dg.ComponentLoadContext) -> dg.AssetsDefinition:
        return reference_asset(**self.common(), id_columns=self.id_columns, deps=_keys(self.deps))(
            _function(context, self.function)
        )


@dataclass(kw_only=True)
class ScoringReference(dg.Resolvable):
    """A reference input: the defs path of its component, joined on ``join_on``."""

    component: str
    #: {main column: reference column} (not `on`: YAML reads `on` as true)
    join_on: dict[str, str] = field(default_factory=dict)


class ScoringScaffolder(dg.Scaffolder):
    """A working scoring asset over the features of ``my_features`` (the featurized
    scaffold's example: change ``upstream`` to the defs path of yours) and ``scores.py``."""

    def scaffold(self, request: ScaffoldRequest) -> None:
        name = request.target_path.name
        dg.scaffold_component(
            request,
            {
                "name": name,
                "function": "scores.py:score",
                "upstream": "my_features",
                "partitions": {"type": "daily", "start_date": "2024-01-01"},
                "code_version": "1",
                "dataset": name,
                "uses_columns": ["total"],
                "columns": {"entity": "string", "score": "double"},
                "base_uri": "datasets",
                "automation_condition": "{{ revisions_automation() }}",
            },
        )
        (request.target_path / "scores.py").write_text(SCORES_TEMPLATE)


SCORES_TEMPLATE = '''"""The function of a scoring asset (see defs.yaml): replace it."""

from pyspark.sql import DataFrame
from pyspark.sql import functions as F


def score(features: DataFrame) -> DataFrame:
    """Scores of the entities whose features changed (references: keyword arguments)."""
    return features.select("entity", (F.col("total") * 2.0).alias("score"))
'''


@scaffold_with(ScoringScaffolder)
@dataclass(kw_only=True)
class ScoringAssetComponent(_RevisionedAsset):
    """A scoring asset (``scoring_asset``): ``function(main_rows, **reference_rows)`` scores
    what changed upstream. Inputs are named by the defs paths of their components."""

    #: the defs path of the component of the main input (a featurized asset)
    upstream: str
    partitions: PartitionsField
    references: dict[str, ScoringReference] | None = None
    id_columns: list[str] | None = None
    #: the main input's columns the scorer reads (changes of others re-score nothing)
    uses_columns: list[str] | None = None
    #: the consumer_lag check: at most this many revisions (and seconds) behind each upstream
    max_lag_revisions: int = 1
    max_lag_seconds: float | None = None
    #: the scoring runs in a remote job launched with Dagster Pipes (``function`` is then
    #: ``fn(context, job, **clients)``, docs/guides/pipes.md)
    pipes: bool = False

    def check_options(self, context: dg.ComponentLoadContext) -> dict[str, Any]:
        return {
            **super().check_options(context),
            "max_lag_revisions": self.max_lag_revisions,
            "max_lag_seconds": self.max_lag_seconds,
        }

    def asset(self, context: dg.ComponentLoadContext) -> dg.AssetsDefinition:
        what = f"component {self.name}"
        return scoring_asset(
            **self.common(),
            upstream=_component_asset(context, self.upstream, f"{what}: upstream"),
            references={
                name: Reference(
                    _component_asset(context, r.component, f"{what}: reference {name!r}"),
                    on=r.join_on,
                )
                for name, r in (self.references or {}).items()
            },
            partitions_def=self.partitions,  # type: ignore[arg-type]
            id_columns=self.id_columns,
            uses_columns=self.uses_columns,
            pipes=self.pipes,
        )(_function(context, self.function))


class UnknownComponentError(RevisionsError, ValueError):
    """A defs path that names no revisioned component of the project (a scoring asset's
    ``upstream`` or reference, a schedule's assets)."""


def component_at(
    context: dg.ComponentLoadContext, path: str, of_type: type[_Component], what: str
) -> _Component:
    """The component of type ``of_type`` at the defs path ``path``; UnknownComponentError
    naming those of the project when there is none (``what``: who names it)."""
    found = _components(context, of_type)
    if path.strip("/") not in found:
        label = "revisioned asset component" if of_type is _RevisionedAsset else of_type.__name__
        known = ", ".join(f"{p} ({type(c).__name__})" for p, c in sorted(found.items()))
        defs = context.component_tree.defs_module_path.name
        raise UnknownComponentError(
            f"{what} {path!r} ({context.path}/defs.yaml) names no {label} of this project; "
            f"give the defs path of one (its folder under {defs}/): {known or 'there is none'}"
        )
    return found[path.strip("/")]


def _components(
    context: dg.ComponentLoadContext, of_type: type[_Component]
) -> dict[str, _Component]:
    """{defs path: component} of the project's components of type ``of_type``."""
    tree = context.component_tree
    root = tree.defs_module_path
    # the declarations with their paths: Dagster's tree has no public listing of them
    declared = tree._component_decl_tree()
    return {
        loc.file_path.relative_to(root).as_posix(): tree.load_component(loc)
        for loc, decl in declared.items()
        if isinstance(decl.component_type, type)
        and issubclass(decl.component_type, of_type)
        and getattr(loc, "file_path", None) is not None
        and loc.file_path.is_relative_to(root)
    }


def _component_asset(context: dg.ComponentLoadContext, path: str, what: str) -> dg.AssetsDefinition:
    """The revisioned asset the component at ``path`` (of the defs folder) builds."""
    component_at(context, path, _RevisionedAsset, what)
    found: Sequence[Any] = context.build_defs(path.strip("/")).assets or []
    (asset,) = [a for a in found if isinstance(a, dg.AssetsDefinition)]
    return asset
