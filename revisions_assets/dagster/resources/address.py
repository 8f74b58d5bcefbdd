"""Where a revisioned asset's data lives, as recorded in its definition metadata.

An asset of this layer is one table of one revisioned dataset: its *address*
(``revisions/dataset``, ``revisions/table``, ``revisions/id_columns``) and its
role (``revisions/role``) are definition metadata, so the UI and tools show
them; a scoring asset also lists its inputs (``revisions/upstream``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import timedelta
from enum import StrEnum
from typing import Any

import dagster as dg

from revisions_assets.core.errors import RevisionsError

META_DATASET = "revisions/dataset"
META_TABLE = "revisions/table"
META_ID_COLUMNS = "revisions/id_columns"
META_ROLE = "revisions/role"
META_UPSTREAM = "revisions/upstream"
#: optional, featurized: {value column: version} of the fields not at the code version
META_FIELD_VERSIONS = "revisions/field_versions"
#: optional, scoring: the main input's columns the scorer reads (changes of others are none)
META_USES_COLUMNS = "revisions/uses_columns"
#: optional: {column: description}, shown in the Columns tab of every materialization
META_COLUMN_DESCRIPTIONS = "revisions/column_descriptions"
#: optional: "pipes" when the asset's Spark runs in a remote job (``pipes=True``)
META_REMOTE = "revisions/remote"
#: optional, featurized: how far before its window the asset reads its sources, in seconds
META_LOOKBACK = "revisions/lookback_seconds"


class Role(StrEnum):
    """What a revisioned asset is (definition metadata ``revisions/role``)."""

    FEATURIZED = "featurized"
    REFERENCE = "reference"
    SCORING = "scoring"


class NotRevisionedAssetError(RevisionsError, ValueError):
    """An asset the revisions layer cannot handle: no dataset address, several assets in one
    step, or a scoring asset without time partitions."""


def _text(value: Any) -> str:
    return str(getattr(value, "value", value))


@dataclass(frozen=True)
class TableAddress:
    """One table of one revisioned dataset.

    ``dataset`` is a name under the location's base URI, or a full URI/absolute path.
    """

    dataset: str
    table: str
    id_columns: tuple[str, ...]

    def to_metadata(self, role: Role) -> dict[str, str]:
        return {
            META_DATASET: self.dataset,
            META_TABLE: self.table,
            META_ID_COLUMNS: ",".join(self.id_columns),
            META_ROLE: role.value,
        }

    @classmethod
    def from_metadata(cls, metadata: Mapping[str, Any], what: str) -> TableAddress:
        missing = [k for k in (META_DATASET, META_TABLE, META_ID_COLUMNS) if k not in metadata]
        if missing:
            raise NotRevisionedAssetError(
                f"asset {what} has no revisioned-dataset address (missing metadata {missing}); "
                "declare it with featurized_asset, scoring_asset or reference_asset"
            )
        return cls(
            dataset=_text(metadata[META_DATASET]),
            table=_text(metadata[META_TABLE]),
            id_columns=tuple(c for c in _text(metadata[META_ID_COLUMNS]).split(",") if c),
        )


@dataclass(frozen=True)
class UpstreamRef:
    """One input of a scoring asset: the input's name, the upstream asset and its table."""

    input_name: str
    asset_key: str
    dataset: str
    table: str
    id_columns: tuple[str, ...]
    kind: str  # "main" (its changes drive the work) or "reference" (joined on keys)
    #: a reference's join: {main column: reference column}
    on: Mapping[str, str] = field(default_factory=dict)


def upstream_refs_metadata(refs: Sequence[UpstreamRef]) -> dg.JsonMetadataValue:
    return dg.MetadataValue.json([asdict(ref) for ref in refs])


def upstream_refs(metadata: Mapping[str, Any]) -> tuple[UpstreamRef, ...]:
    """The inputs a scoring asset declared (empty for other assets)."""
    raw = metadata.get(META_UPSTREAM)
    if raw is None:
        return ()
    items = raw.data if isinstance(raw, dg.JsonMetadataValue) else raw
    return tuple(UpstreamRef(**{**item, "id_columns": tuple(item["id_columns"])}) for item in items)


def address_of(assets_def: dg.AssetsDefinition) -> TableAddress:
    key = assets_def.key
    return TableAddress.from_metadata(assets_def.metadata_by_key[key], key.to_user_string())


def role_of(metadata: Mapping[str, Any]) -> Role:
    return Role(_text(metadata.get(META_ROLE, Role.FEATURIZED.value)))


def field_versions(metadata: Mapping[str, Any]) -> dict[str, str]:
    """A featurized asset's declared field versions (empty: every field at the code version)."""
    raw = metadata.get(META_FIELD_VERSIONS)
    if raw is None:
        return {}
    return dict(raw.data if isinstance(raw, dg.JsonMetadataValue) else raw)


def uses_columns(metadata: Mapping[str, Any]) -> tuple[str, ...] | None:
    """A scoring asset's ``uses_columns`` (None: every column)."""
    raw = metadata.get(META_USES_COLUMNS)
    if raw is None:
        return None
    return tuple(_text(raw).split(","))


def lookback(metadata: Mapping[str, Any]) -> timedelta:
    """A featurized asset's ``lookback`` (zero when it declares none)."""
    raw = metadata.get(META_LOOKBACK)
    return timedelta(seconds=float(_text(raw))) if raw is not None else timedelta(0)


def runs_remotely(metadata: Mapping[str, Any]) -> bool:
    """Whether the asset's Spark runs in a remote job launched through Dagster Pipes."""
    return _text(metadata.get(META_REMOTE, "")) == "pipes"


def column_descriptions(metadata: Mapping[str, Any]) -> dict[str, str]:
    raw = metadata.get(META_COLUMN_DESCRIPTIONS)
    if raw is None:
        return {}
    return dict(raw.data if isinstance(raw, dg.JsonMetadataValue) else raw)
