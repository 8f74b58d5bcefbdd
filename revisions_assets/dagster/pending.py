"""A pending major, shown before anyone runs anything (docs/guides/upkeep.md#staleness).

After a bump of an asset's code version (or of a field's version) and a reload of the code
location, the asset's next run is a major; nothing has run yet, and with the automation
sensor stopped (the default) nothing will. Two things show it:

- **per partition**, Dagster itself: every materialization carries the code version that
  computed it (``dagster/code_version``, also on the partitions a major reports), so each
  materialized partition of an asset whose code version changed is stale ("Unsynced": has
  a new code version) in the asset's Partitions tab (not after a field version bump:
  Dagster knows only the code version);
- **per asset**, the definitions: Dagster reports a partitioned asset as fresh whatever its
  partitions say, so when the code location loads, every revisioned asset whose table's head
  was written by other versions gets the tag ``revisions/pending: major`` (the catalog
  filters on it) and the definition metadata ``revisions/pending_major``: why, and over
  which partitions the major runs. Read from the logs only (no Spark), when the code
  location loads: it holds until the next load (a reload after the major clears it).

Components that know their datasets' location (``base_uri``, or a ``RevisionsResources``
component) mark their assets themselves; a project that binds the revisions resources in
Python passes its Definitions through ``pending_majors``.
"""

from __future__ import annotations

import logging
import warnings

import dagster as dg

from revisions_assets.core.errors import RevisionsError
from revisions_assets.core.timeutil import now_utc

from .automation import TAG_REASON, built_location, version_request
from .factory import io_manager_key_of
from .resources.address import META_DATASET
from .resources.location import DatasetLocation
from .resources.slice import describe

#: the tag of an asset whose next run is a major (its value: ``major``)
TAG_PENDING = "revisions/pending"
#: definition metadata of such an asset: why, and over which partitions
META_PENDING = "revisions/pending_major"

log = logging.getLogger(__name__)


def pending_major(location: DatasetLocation, asset: dg.AssetsDefinition) -> str | None:
    """Why the asset's next run is a major and what it covers (None: no major is due, or the
    asset was never materialized: its first run is a major anyway)."""
    request = version_request(location, asset)
    if request is None:
        return None
    over = f" over partitions {describe(request.partitions)}" if request.partitions else ""
    loaded = now_utc().isoformat(timespec="seconds")
    return (
        f"{request.tags[TAG_REASON]}: the next run is a major{over} (read from the log when "
        f"the code location loaded, {loaded})"
    )


def _pending(location: DatasetLocation, asset: dg.AssetsDefinition) -> str | None:
    """``pending_major``; a log that cannot be read is logged and shows nothing (the load of
    the code location goes on)."""
    try:
        return pending_major(location, asset)
    except (RevisionsError, OSError) as exc:
        log.warning(f"{asset.key.to_user_string()}: whether a major is pending is unknown: {exc}")
        return None


def _marked(spec: dg.AssetSpec, why: str) -> dg.AssetSpec:
    return spec.merge_attributes(tags={TAG_PENDING: "major"}, metadata={META_PENDING: why})


def mark_pending(asset: dg.AssetsDefinition, location: DatasetLocation) -> dg.AssetsDefinition:
    """``asset`` with its pending major shown (``TAG_PENDING``, ``META_PENDING``), or as it
    is when none is pending."""
    why = _pending(location, asset)
    return asset if why is None else asset.map_asset_specs(lambda spec: _marked(spec, why))


def pending_majors(defs: dg.Definitions) -> dg.Definitions:
    """``defs`` with the pending major of every revisioned asset shown (see the module doc),
    read through the location of the IO manager each asset is bound to in ``defs``."""
    resources = defs.resources or {}
    reasons: dict[dg.AssetKey, str] = {}
    for asset in defs.assets or []:
        if not isinstance(asset, dg.AssetsDefinition) or len(asset.keys) != 1:
            continue
        key = io_manager_key_of(asset) if asset.is_materializable else None
        if META_DATASET not in asset.metadata_by_key[asset.key] or key not in resources:
            continue
        why = _pending(built_location(resources[key], key), asset)
        if why is not None:
            reasons[asset.key] = why
    if not reasons:
        return defs
    with warnings.catch_warnings():  # map_resolved_asset_specs is a preview of Dagster 1.13
        warnings.simplefilter("ignore", dg.PreviewWarning)
        return defs.map_resolved_asset_specs(
            func=lambda spec: _marked(spec, reasons[spec.key]), selection=list(reasons)
        )
