"""Vacuum as a Dagster job: the asset graph knows who consumes a dataset
(docs/concepts/lifecycle.md).

An upstream dataset does not know its consumers; the Definitions do. ``vacuum_job``
vacuums the datasets of the given assets and passes, for each one, the datasets of the
scoring assets that read it as ``consumers``: their recorded positions keep what their
next change read needs. ``weekly_vacuum_schedule`` runs it (STOPPED until turned on).
"""

from collections.abc import Sequence
from datetime import timedelta

import dagster as dg
from pydantic import Field

from revisions_assets.core.maintain.vacuum import VacuumReport

from .resources.address import address_of, upstream_refs
from .resources.keys import LOCATION_KEY
from .resources.location import DatasetLocation


class VacuumConfig(dg.Config):
    """Run configuration of the vacuum job."""

    retain_days: float = Field(
        default=7.0,
        description="Keep everything a read of a time or position within this many days needs.",
    )
    grace_hours: float = Field(
        default=1.0,
        description="Leave folders of failed or killed writers alone until this old.",
    )
    keep_majors: bool = Field(default=True, description="Keep every major (cheap checkpoints).")
    dry_run: bool = Field(default=False, description="Report what would go; delete nothing.")


def consumers_by_dataset(assets: Sequence[dg.AssetsDefinition]) -> dict[str, list[str]]:
    """Dataset name -> the datasets of the scoring assets among ``assets`` that read it."""
    found: dict[str, list[str]] = {address_of(a).dataset: [] for a in assets}
    for asset in assets:
        for ref in upstream_refs(asset.metadata_by_key[asset.key]):
            consumer = address_of(asset).dataset
            if consumer not in found.setdefault(ref.dataset, []):
                found[ref.dataset].append(consumer)
    return found


def vacuum_job(
    assets: Sequence[dg.AssetsDefinition], *, name: str = "revisions_vacuum"
) -> dg.JobDefinition:
    """A job that vacuums the datasets of ``assets``, each with its consumers' positions."""
    plan = consumers_by_dataset(assets)

    @dg.op(
        name=f"{name}_datasets",
        required_resource_keys={LOCATION_KEY},
        description="Vacuum each dataset, keeping what its consumers' next change reads need.",
    )
    def vacuum_datasets(
        context: dg.OpExecutionContext, config: VacuumConfig
    ) -> dict[str, dict[str, object]]:
        location: DatasetLocation = getattr(context.resources, LOCATION_KEY)
        reports = {}
        for dataset, consumers in sorted(plan.items()):
            if not location.read_log(dataset):
                context.log.info(f"{dataset}: no revision yet, nothing to vacuum")
                continue
            handles = [location.dataset(c) for c in consumers if location.read_log(c)]
            report = location.dataset(dataset, writes={}).maintenance.vacuum(
                retain=timedelta(days=config.retain_days),
                grace=timedelta(hours=config.grace_hours),
                keep_majors=config.keep_majors,
                dry_run=config.dry_run,
                consumers=handles,
            )
            context.log.info(describe_report(dataset, report, consumers))
            for finding in report.findings:
                context.log.warning(f"{dataset}: {finding.message}; fix: {finding.fix}")
            reports[dataset] = report_json(report, consumers)
            reports[dataset]["entries"] = len(location.read_log(dataset))
        metadata = {dataset: dg.MetadataValue.json(report) for dataset, report in reports.items()}
        damaged = sorted(dataset for dataset, report in reports.items() if report["findings"])
        if damaged:  # as `revisions vacuum` exits 1: the run says so, after every dataset
            raise dg.Failure(
                description=f"vacuum found damage in {', '.join(damaged)} (and kept what it "
                "stands for, and every orphan folder): run `revisions verify` on them and "
                "repair what it reports (see 'Recovering a damaged dataset')",
                metadata=metadata,
            )
        context.add_output_metadata(metadata)
        return reports

    @dg.job(name=name, description="Vacuum the revisioned datasets (docs/concepts/lifecycle.md).")
    def job() -> None:
        vacuum_datasets()

    return job


def describe_report(dataset: str, report: VacuumReport, consumers: Sequence[str]) -> str:
    verb = "would remove" if report.dry_run else "removed"
    kept_for = f", keeping what {', '.join(consumers)} still need" if consumers else ""
    return (
        f"{dataset}: {verb} {len(report.revisions)} revisions, {len(report.orphans)} orphan "
        f"folders, {len(report.temporary_files)} temporary files ({report.files} files, "
        f"{report.bytes} bytes){kept_for}; horizon {report.horizon.describe()}"
    )


def report_json(report: VacuumReport, consumers: Sequence[str]) -> dict[str, object]:
    return {
        "revisions": list(report.revisions),
        "orphans": list(report.orphans),
        "temporary_files": len(report.temporary_files),
        "files": report.files,
        "bytes": report.bytes,
        "horizon": report.horizon.describe(),
        "consumers": list(consumers),
        "entry": report.entry.name if report.entry is not None else None,
        "kept": [*report.kept, *report.kept_files],
        "orphans_kept": list(report.orphans_kept),
        "findings": [f"{f.kind}: {f.message}" for f in report.findings],
    }


def weekly_vacuum_schedule(
    job: dg.JobDefinition,
    *,
    name: str = "revisions_vacuum_weekly",
    cron_schedule: str = "0 3 * * 0",
    default_status: dg.DefaultScheduleStatus = dg.DefaultScheduleStatus.STOPPED,
) -> dg.ScheduleDefinition:
    """Run ``job`` weekly (Sunday 03:00 by default); STOPPED until turned on in the UI."""
    return dg.ScheduleDefinition(
        name=name, job=job, cron_schedule=cron_schedule, default_status=default_status
    )
