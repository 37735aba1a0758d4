"""Versioned checkpoint documents, validated on read (Airflow stores one Variable per pipeline).

>>> cp = BlobCheckpoint(watermark=parse_time("2026-01-01T02:10Z"))
>>> BlobCheckpoint.from_json(cp.to_json(), "v") == cp
True
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from lakefeed.blob.timegrid import format_time, parse_time
from lakefeed.jsonio import json_object

CHECKPOINT_VERSION = 1


class CheckpointError(ValueError):
    """A stored checkpoint that cannot be trusted; the message names where it lives."""


def _document(text: str | None, where: str, pipeline: str) -> dict[str, Any] | None:
    document = json_object(text, f"checkpoint {where}", CheckpointError)
    if document is None:
        return None
    if document.get("version") != CHECKPOINT_VERSION:
        raise CheckpointError(
            f"checkpoint {where} has version {document.get('version')!r}; this code reads version "
            f"{CHECKPOINT_VERSION}"
        )
    if document.get("pipeline") != pipeline:
        raise CheckpointError(f"checkpoint {where} belongs to pipeline {document.get('pipeline')!r}, not {pipeline}")
    return document


def _dump(pipeline: str, fields: dict[str, Any]) -> str:
    return json.dumps({"version": CHECKPOINT_VERSION, "pipeline": pipeline, **fields}, sort_keys=True)


@dataclass(frozen=True)
class BlobCheckpoint:
    """Every window before ``watermark`` has been merged into the targets.

    ``last_consumable`` is the feed's lastConsumable last seen; it must never
    move backwards.
    """

    watermark: datetime | None = None
    last_consumable: datetime | None = None
    updated_by: str | None = None

    def to_json(self) -> str:
        return _dump("blob_changefeed", {
            "watermark": format_time(self.watermark) if self.watermark else None,
            "lastConsumable": format_time(self.last_consumable) if self.last_consumable else None,
            "updatedBy": self.updated_by,
        })

    @classmethod
    def from_json(cls, text: str | None, where: str) -> "BlobCheckpoint":
        document = _document(text, where, "blob_changefeed")
        if document is None:
            return cls()
        return cls(
            watermark=_time_or_none(document.get("watermark"), where, "watermark"),
            last_consumable=_time_or_none(document.get("lastConsumable"), where, "lastConsumable"),
            updated_by=document.get("updatedBy"),
        )

    def advanced(self, watermark: datetime | None, last_consumable: datetime | None,
                 updated_by: str) -> "BlobCheckpoint":
        """This checkpoint moved forward (never backwards) to ``watermark``."""
        new_watermark = max(filter(None, (self.watermark, watermark)), default=None)
        new_last = max(filter(None, (self.last_consumable, last_consumable)), default=None)
        if (new_watermark, new_last) == (self.watermark, self.last_consumable):
            return self
        return replace(self, watermark=new_watermark, last_consumable=new_last, updated_by=updated_by)


@dataclass(frozen=True)
class CdfCheckpoint:
    """Every source version up to ``applied_version`` is in the target (None: nothing yet)."""

    applied_version: int | None = None
    updated_by: str | None = None

    def to_json(self) -> str:
        return _dump("delta_cdf", {"appliedVersion": self.applied_version, "updatedBy": self.updated_by})

    @classmethod
    def from_json(cls, text: str | None, where: str) -> "CdfCheckpoint":
        document = _document(text, where, "delta_cdf")
        if document is None:
            return cls()
        applied = document.get("appliedVersion")
        if applied is not None and (isinstance(applied, bool) or not isinstance(applied, int) or applied < 0):
            raise CheckpointError(f"checkpoint {where}: appliedVersion must be a version number, got {applied!r}")
        return cls(applied_version=applied, updated_by=document.get("updatedBy"))

    def advanced(self, applied_version: int | None, updated_by: str) -> "CdfCheckpoint":
        if applied_version is None or (self.applied_version is not None and applied_version <= self.applied_version):
            return self
        return replace(self, applied_version=applied_version, updated_by=updated_by)


def _time_or_none(value, where: str, name: str) -> datetime | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise CheckpointError(f"checkpoint {where}: {name} must be an ISO time string, got {value!r}")
    try:
        return parse_time(value)
    except ValueError:
        raise CheckpointError(f"checkpoint {where}: {name} {value!r} is not an ISO time") from None
