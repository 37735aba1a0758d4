"""Which version ranges of a source can be read as change data: CDF enablement and schema changes.

Sensors and planning use this to decide without starting Spark; the job uses
it to refuse, with an actionable message, ranges that cannot be read.

Schema rules go by range, not by today's schema. Spark reads a batch change
feed range with the source's *latest* schema (Delta 4.x): a column added
after the range reads as null, so a target made from any range already has
it, and ranges apply in any chunking and order. A column dropped, renamed or
retyped is refused by name, whether the change lies inside the range
(:func:`check_range`), before it (the target still has the old column:
:func:`check_target`) or after it (Delta cannot read the range with the
latest schema: :func:`check_later_changes`).
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import Any

from lakefeed.deltalog import LOG_DIR, DeltaLog
from lakefeed.errors import ChangeDataError

log_module = logging.getLogger(__name__)

CDF_PROPERTY = "delta.enableChangeDataFeed"
# userMetadata key of the commit with which a full refresh rebuilt a target (its value: the source version).
COLUMN_MAPPING_PROPERTY = "delta.columnMapping.mode"


@dataclass(frozen=True)
class SchemaChange:
    version: int
    removed: tuple[str, ...]
    retyped: tuple[str, ...]
    added: tuple[str, ...]
    # Nullable columns made NOT NULL (only looked at when asked: :func:`check_later_changes`).
    tightened: tuple[str, ...] = ()

    @property
    def additive(self) -> bool:
        return not (self.removed or self.retyped or self.tightened)


def cdf_enabled(properties: dict[str, str]) -> bool:
    return str(properties.get(CDF_PROPERTY, "false")).lower() == "true"


def type_signature(delta_type: object) -> str:
    """A Delta schema type as text, without nullability or field metadata (nested ones included): two
    columns whose values read the same way have the same signature."""

    def strip(value: object) -> object:
        if isinstance(value, dict):
            return {
                k: strip(v)
                for k, v in value.items()
                if k not in ("nullable", "metadata", "containsNull", "valueContainsNull")
            }
        if isinstance(value, list):
            return [strip(v) for v in value]
        return value

    return json.dumps(strip(delta_type), sort_keys=True)


def _signatures(fields: list[dict[str, Any]], skip: tuple[str, ...] = ()) -> dict[str, str]:
    return {f["name"]: type_signature(f["type"]) for f in fields if f["name"] not in skip}


def schema_change(
    version: int, before: list[dict[str, Any]], after: list[dict[str, Any]], nullability: bool = False
) -> SchemaChange:
    """The columns ``after`` removed, retyped and added against ``before``; with ``nullability``, also the
    nullable ones it made NOT NULL (Delta will not read data written under ``before`` with ``after``)."""
    old, new = _signatures(before), _signatures(after)
    tightened: tuple[str, ...] = ()
    if nullability:
        required = {f["name"] for f in after if f.get("nullable", True) is False}
        tightened = tuple(
            sorted(
                f["name"]
                for f in before
                if f.get("nullable", True) and f["name"] in required and old[f["name"]] == new[f["name"]]
            )
        )
    return SchemaChange(
        version=version,
        removed=tuple(sorted(set(old) - set(new))),
        retyped=tuple(sorted(n for n in set(old) & set(new) if old[n] != new[n])),
        added=tuple(sorted(set(new) - set(old))),
        tightened=tightened,
    )


def latest_schema(log: DeltaLog) -> list[dict[str, Any]]:
    """Schema fields of the source's latest version."""
    return log.table_state()[1]


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
    # Change data exists at ``start`` when CDF is enabled as of ``start`` (its own commit may enable it);
    # the schema is compared from the commit before ``start``, so a change made by ``start`` itself counts.
    properties, _ = log.table_state(start)
    enabled = cdf_enabled(properties)
    _refuse_column_mapping(where, properties, start)
    fields = _fields_before(log, start)
    changes = []
    for version, metadata in log.metadata_changes(start, end):
        configuration = metadata.get("configuration") or {}
        _refuse_column_mapping(where, configuration, version)
        now_enabled = cdf_enabled(configuration)
        if version > start and not enabled and now_enabled:
            raise _not_enabled(where, start, version)
        if version > start and enabled and not now_enabled:
            raise ChangeDataError(
                f"change data feed was disabled at version {version} of {where}; versions after it have no "
                f"change data. Re-enable it and rebuild the target with a full refresh."
            )
        new_fields = json.loads(metadata["schemaString"])["fields"] if metadata.get("schemaString") else fields
        if fields is not None:  # version 0 creates the table: nothing to compare with
            assert new_fields is not None  # the commit's schema, or else the one before it
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


def _fields_before(log: DeltaLog, start: int) -> list[dict[str, Any]] | None:
    """Schema fields as of the commit before ``start``; None for version 0 (it creates the table). When log
    cleanup left no way to rebuild that version, ``start``'s own schema (the job compares it with the
    target's too, so a change at ``start`` is still caught there)."""
    if start == 0:
        return None
    try:
        return log.table_state(start - 1)[1]
    except Exception as exc:  # delta-rs cannot load a version its log no longer reconstructs
        log_module.warning(
            "%s: version %d cannot be loaded (%s); comparing schemas from version %d",
            log.store.root,
            start - 1,
            exc,
            start,
        )
        return log.table_state(start)[1]


def _refuse_column_mapping(where: str, properties: dict[str, str], version: int) -> None:
    """Column mapping lets a table rename and drop columns in place; the change feed of such a table
    names columns by their current names only, so a range cannot be applied safely. Refused by name."""
    mode = str(properties.get(COLUMN_MAPPING_PROPERTY, "none")).lower()
    if mode != "none":
        raise ChangeDataError(
            f"{where} uses column mapping ({COLUMN_MAPPING_PROPERTY} = {mode} as of version {version}): renamed "
            f"or dropped columns cannot be followed through its change feed, and this pipeline does not support "
            f"such tables. Ingest a copy without column mapping, or rebuild the target with a full refresh "
            f"(delta_cdf_job.py --full-refresh) each time."
        )


def check_target(
    where: str,
    target: str,
    source_fields: list[dict[str, Any]],
    target_fields: list[dict[str, Any]],
    own_columns: tuple[str, ...],
    latest_fields: list[dict[str, Any]] | None = None,
) -> None:
    """Refuse a target whose data columns the source no longer has, or has with another type (the source
    changed them before the range, or the target was made from another table): a MERGE would fail or
    cast values silently.

    ``source_fields`` is the source's schema as of the range's end, ``latest_fields`` its latest one. A
    target column the source lacks at the range's end but has, with the same type, in its latest schema
    was added after the range: Spark reads the range with the latest schema, where it is null, so it is
    accepted (a newer range applied first, or a full refresh, made the target with it). A column in
    neither was dropped or renamed; a column of another type was retyped: both refused by name.
    """
    at_end, target_types = _signatures(source_fields), _signatures(target_fields, own_columns)
    source = {**_signatures(latest_fields or []), **at_end}  # a column the range has: its type as of the range
    missing = sorted(set(target_types) - set(source))
    retyped = sorted(n for n in set(target_types) & set(source) if target_types[n] != source[n])
    if missing or retyped:
        raise ChangeDataError(
            f"target {target} does not match source {where}: column(s) missing from the source: "
            f"{', '.join(missing) or '-'}; type differs: "
            + (
                ", ".join(
                    f"{n} ({json.loads(target_types[n])} in the target, {json.loads(source[n])} in the source)"
                    for n in retyped
                )
                or "-"
            )
            + ". Rebuild the target with a full refresh (delta_cdf_job.py --full-refresh) and resume from its version."
        )


def check_later_changes(
    log: DeltaLog,
    start: int,
    end: int,
    range_fields: list[dict[str, Any]] | None = None,
    latest_fields: list[dict[str, Any]] | None = None,
) -> None:
    """Refuse a range whose columns a later version removed (dropped, renamed), retyped or made NOT NULL,
    naming the columns and the first such version.

    Spark reads a batch change feed range with the table's latest schema and refuses a range whose schema
    is not part of it (``DELTA_CHANGE_DATA_FEED_INCOMPATIBLE_DATA_SCHEMA`` or ``…_SCHEMA_CHANGE``, after
    the job has started): no chunking can read it any more. Columns added later are fine (null in the
    range). ``range_fields`` (the schema as of ``end``; every earlier one of the range is part of it, as
    :func:`check_range` allows additive changes only) and ``latest_fields`` (the latest schema) are read
    from the log when not given.
    """
    latest = log.latest_version()
    if latest is None or end >= latest:
        return
    range_fields = log.table_state(end)[1] if range_fields is None else range_fields
    latest_fields = latest_schema(log) if latest_fields is None else latest_fields
    change = schema_change(latest, range_fields, latest_fields, nullability=True)
    if change.additive:
        return
    version = _first_changed_at(
        log, end + 1, latest, range_fields, {*change.removed, *change.retyped, *change.tightened}
    )
    tightened = f"; made NOT NULL: {', '.join(change.tightened)}" if change.tightened else ""
    raise ChangeDataError(
        f"the range [{start}, {end}] of {log.root} cannot be read as change data: Spark reads it with the "
        f"table's latest schema, and later versions changed its columns non-additively (removed: "
        f"{', '.join(change.removed) or '-'}; type changed: {', '.join(change.retyped) or '-'}{tightened}), "
        f"first at version {version}. Rebuild the target with a full refresh (delta_cdf_job.py --full-refresh) "
        f"at version {version} or later and resume from its version; older ranges are then no-ops."
    )


def _first_changed_at(log: DeltaLog, first: int, last: int, fields: list[dict[str, Any]], columns: set[str]) -> int:
    """The first version in ``first..last`` whose schema removes, retypes or tightens one of ``columns``
    against ``fields`` (``last`` when the commits cannot tell: log cleanup running meanwhile)."""
    try:
        for version, metadata in log.metadata_changes(first, last):
            if metadata.get("schemaString"):
                change = schema_change(
                    version, fields, json.loads(metadata["schemaString"])["fields"], nullability=True
                )
                if columns & {*change.removed, *change.retyped, *change.tightened}:
                    return version
    except ChangeDataError as exc:
        log_module.warning("%s: cannot find the version that changed %s (%s)", log.root, sorted(columns), exc)
    return last


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
