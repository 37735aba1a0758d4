"""Which version ranges of a source can be read as change data: CDF enablement and schema changes.

Sensors and planning use this to decide without starting Spark; the job uses
it to refuse, with an actionable message, ranges that cannot be read.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from lakefeed.deltalog import LOG_DIR, DeltaLog
from lakefeed.errors import ChangeDataError

CDF_PROPERTY = "delta.enableChangeDataFeed"


@dataclass(frozen=True)
class SchemaChange:
    version: int
    removed: tuple[str, ...]
    retyped: tuple[str, ...]
    added: tuple[str, ...]

    @property
    def additive(self) -> bool:
        return not (self.removed or self.retyped)


def cdf_enabled(properties: dict[str, str]) -> bool:
    return str(properties.get(CDF_PROPERTY, "false")).lower() == "true"


def schema_change(version: int, before: list[dict], after: list[dict]) -> SchemaChange:
    old = {f["name"]: json.dumps(f["type"], sort_keys=True) for f in before}
    new = {f["name"]: json.dumps(f["type"], sort_keys=True) for f in after}
    return SchemaChange(
        version=version,
        removed=tuple(sorted(set(old) - set(new))),
        retyped=tuple(sorted(n for n in set(old) & set(new) if old[n] != new[n])),
        added=tuple(sorted(set(new) - set(old))),
    )


def check_range(log: DeltaLog, start: int, end: int) -> list[SchemaChange]:
    """Refuse a range that cannot be read as change data; return its (additive) schema changes."""
    where = log.store.root
    versions = log.commit_versions()
    if not versions:
        raise ChangeDataError(f"{where} is not a Delta table (no {LOG_DIR}/ commits)")
    latest = versions[-1]
    if start < 0 or end < start:
        raise ChangeDataError(f"invalid version range [{start}, {end}]")
    if start > latest:
        raise ChangeDataError(f"starting version {start} is beyond the latest version {latest} of {where}")
    if end > latest:
        raise ChangeDataError(f"ending version {end} is beyond the latest version {latest} of {where}")
    missing = sorted(set(range(start, end + 1)) - set(versions))
    if missing:
        raise ChangeDataError(
            f"versions {missing[0]}..{missing[-1]} of {where} are no longer in its log (removed by log "
            f"cleanup after delta.logRetentionDuration); their change data cannot be read. Rebuild the target "
            f"with a full refresh (delta_cdf_job.py --full-refresh) and resume from its version."
        )
    properties, fields = log.table_state(start)
    enabled = cdf_enabled(properties)
    changes = []
    for version, metadata in log.metadata_changes(start, end):
        now_enabled = cdf_enabled(metadata.get("configuration") or {})
        if not enabled and now_enabled:
            raise _not_enabled(where, start, version)
        if enabled and not now_enabled:
            raise ChangeDataError(
                f"change data feed was disabled at version {version} of {where}; versions after it have no "
                f"change data. Re-enable it and rebuild the target with a full refresh."
            )
        new_fields = json.loads(metadata["schemaString"])["fields"] if metadata.get("schemaString") else fields
        change = schema_change(version, fields, new_fields)
        if not change.additive:
            raise ChangeDataError(
                f"version {version} of {where} changes the schema non-additively (removed: "
                f"{', '.join(change.removed) or '-'}; type changed: {', '.join(change.retyped) or '-'}); "
                f"a change feed range cannot span it. Apply up to version {version - 1}, then rebuild the "
                f"target with a full refresh at version {version} or later."
            )
        if change.added:
            changes.append(change)
        fields = new_fields
    if not enabled:
        enabled_at = _enabled_at(log, end + 1, latest)
        raise _not_enabled(where, start, enabled_at)
    return changes


def _enabled_at(log: DeltaLog, first: int, last: int) -> int | None:
    for version, metadata in log.metadata_changes(first, last):
        if cdf_enabled(metadata.get("configuration") or {}):
            return version
    return None


def _not_enabled(where: str, start: int, enabled_at: int | None) -> ChangeDataError:
    if enabled_at is None:
        return ChangeDataError(
            f"change data feed is not enabled on {where} at version {start} (set the table property "
            f"{CDF_PROPERTY} = true); only changes committed after enabling it are recorded"
        )
    return ChangeDataError(
        f"change data feed was enabled at version {enabled_at} of {where}; version {start} has no change data. "
        f"Start at version {enabled_at}, after rebuilding the target with a full refresh at version "
        f"{enabled_at} (delta_cdf_job.py --full-refresh --version {enabled_at})."
    )
