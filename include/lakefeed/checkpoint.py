"""Versioned checkpoint documents, validated on read (Airflow stores one Variable per pipeline).

A checkpoint says how far a pipeline got *and what it got there on*: the feed
(storage identity) or the source table (``metaData.id``) it read, and each
Delta target (table id, version) it wrote. Like the Azure SDK's continuation
token, which records its account and refuses another, a checkpoint refuses a
feed, source or target it does not belong to (:func:`verify_feed`,
:func:`verify_table`). ``generation`` counts writes: the store's
compare-and-set compares it.

Version 2 documents are written; version 1 documents (no identity) are still
read, and the next write records identity.

Each feed's checkpoint (``lakefeed.<feed>.checkpoint``) is a frozen dataclass built on :class:`Moves`
and the document helpers here.
"""

from __future__ import annotations

import json
from dataclasses import Field, dataclass, replace
from datetime import datetime
from typing import Any, ClassVar, Self

from lakefeed.deltalog import TableState
from lakefeed.errors import CheckpointError, CheckpointMismatchError
from lakefeed.jsonio import json_object
from lakefeed.times import parse_time

CHECKPOINT_VERSION = 2
READABLE_VERSIONS = (1, 2)

__all__ = [
    "CheckpointError",
    "CheckpointMismatchError",
    "Moves",
    "TableMark",
    "verify_definition",
    "verify_feed",
    "verify_table",
]


@dataclass(frozen=True)
class TableMark:
    """A Delta target as a checkpoint last saw it after work was applied: which table, at which version."""

    table_id: str
    version: int

    def to_dict(self) -> dict[str, Any]:
        return {"tableId": self.table_id, "version": self.version}

    @classmethod
    def from_dict(cls, value: Any, where: str, lowest: int = 0) -> TableMark:
        """``lowest`` -1 for an ``announced`` mark: -1 is "none of this table's commits yet"."""
        version = value.get("version") if isinstance(value, dict) else None
        if (
            not isinstance(value, dict)
            or not isinstance(value.get("tableId"), str)
            or not (isinstance(version, int) and not isinstance(version, bool) and version >= lowest)
        ):
            raise CheckpointError(
                f'checkpoint {where}: a target must be {{"tableId": str, "version": int}}, got {value!r}'
            )
        return cls(value["tableId"], value["version"])

    @classmethod
    def of(cls, state: TableState | None) -> TableMark | None:
        return None if state is None else cls(state.table_id, state.latest_version)


def targets_from(document: dict[str, Any], where: str, name: str = "targets") -> dict[str, TableMark]:
    raw = document.get(name) or {}
    if not isinstance(raw, dict):
        raise CheckpointError(f"checkpoint {where}: {name} must be an object")
    lowest = -1 if name == "announced" else 0
    return {
        str(location): TableMark.from_dict(mark, f"{where} {name}[{location!r}]", lowest)
        for location, mark in raw.items()
    }


def marks_json(marks: dict[str, TableMark]) -> dict[str, Any]:
    return {location: mark.to_dict() for location, mark in sorted(marks.items())}


def parse_document(text: str | None, where: str, pipeline: str) -> dict[str, Any] | None:
    document = json_object(text, f"checkpoint {where}", CheckpointError)
    if document is None:
        return None
    if document.get("version") not in READABLE_VERSIONS:
        raise CheckpointError(
            f"checkpoint {where} has version {document.get('version')!r}; this code reads versions "
            f"{', '.join(map(str, READABLE_VERSIONS))}"
        )
    if document.get("pipeline") != pipeline:
        raise CheckpointError(f"checkpoint {where} belongs to pipeline {document.get('pipeline')!r}, not {pipeline}")
    generation = document.get("generation", 0)
    if not is_count(generation):
        raise CheckpointError(f"checkpoint {where}: generation must be a count, got {generation!r}")
    return document


def dump_document(pipeline: str, fields_: dict[str, Any]) -> str:
    return json.dumps({"version": CHECKPOINT_VERSION, "pipeline": pipeline, **fields_}, sort_keys=True)


def is_count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def string_or_none(document: dict[str, Any], name: str, where: str) -> str | None:
    value = document.get(name)
    if value is not None and not isinstance(value, str):
        raise CheckpointError(f"checkpoint {where}: {name} must be a string, got {value!r}")
    return value


class Moves:
    """Checkpoints change only through :meth:`moved`, which counts the generation.

    Every checkpoint also keeps ``announced``: per target, a mark through which every ledger entry of
    the pipeline (its commits that changed rows, :mod:`lakefeed.ledger`) is named by a recorded asset
    event, so the ledger is read from there.
    """

    # Subclasses are frozen dataclasses: this says so to the type checker (``dataclasses.replace``).
    __dataclass_fields__: ClassVar[dict[str, Field[Any]]]
    generation: int
    updated_by: str | None
    announced: dict[str, TableMark]

    def same_position(self, other: Moves) -> bool:
        """Both say the same of the pipeline's progress and targets (``announced`` and the write count aside)."""

        def position(checkpoint: Moves) -> Moves:
            return replace(checkpoint, announced={}, generation=0, updated_by=None)

        return position(self) == position(other)

    def moved(self, **changes: Any) -> Self:
        """This checkpoint with ``changes`` and the next generation (itself when nothing differs)."""
        updated_by = changes.pop("updated_by", self.updated_by)
        candidate = replace(self, **changes)
        if candidate == self:
            return self
        return replace(candidate, generation=self.generation + 1, updated_by=updated_by)


def verify_feed(recorded: str | None, current: str, variable: str, remedy: str) -> None:
    """Refuse to go on from a checkpoint made on another feed."""
    if recorded is not None and recorded != current:
        raise CheckpointMismatchError(
            f"checkpoint {variable} belongs to the feed {recorded}, but this pipeline now reads {current}: "
            f"its watermark says nothing about this feed. Point the configuration back at {recorded}, or {remedy}."
        )


def verify_definition(what: str, recorded: Any, current: Any, variable: str, remedy: str) -> None:
    """Refuse to go on when a definition that shapes the targets (a CDF pipeline's keys or columns, the
    CockroachDB target root) differs from the one the checkpoint was made with (None: not recorded)."""
    if recorded is not None and recorded != current:
        raise CheckpointMismatchError(
            f"checkpoint {variable} was made with {what} {_shown(recorded)}, but the configuration now says "
            f"{_shown(current)}: the targets hold rows shaped by the old definition, and going on would mix two. "
            f"Put the configuration back to {_shown(recorded)}, or {remedy}."
        )


def _shown(value: Any) -> str:
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(map(str, value)) + "]"
    return "all columns" if value is None else str(value)


def verify_table(
    role: str,
    location: str,
    recorded_id: str | None,
    mark: TableMark | None,
    state: TableState | None,
    variable: str,
    remedy: str,
) -> None:
    """Refuse to go on when the table behind a checkpoint is not the one it was made on.

    ``recorded_id`` is the table id the checkpoint recorded for a source (None: not recorded);
    ``mark`` what it recorded for a target. A target that is gone, recreated (another id),
    replaced by an older copy (a lower version) or RESTOREd to a version before the mark no
    longer holds what the checkpoint says: going on would leave a hole.
    """
    expected = mark.table_id if mark is not None else recorded_id
    if expected is None:
        return
    prefix = f"checkpoint {variable} says the {role} table {location}"
    if state is None:
        raise CheckpointMismatchError(
            f"{prefix} holds its work, but there is no Delta table there any more "
            f"(dropped or moved). To rebuild it, {remedy}."
        )
    if state.table_id != expected:
        raise CheckpointMismatchError(
            f"{prefix} is table {expected}, but the table there now is {state.table_id}: it was dropped and "
            f"recreated, so the checkpoint no longer describes it. To start over on the new table, {remedy}."
        )
    if mark is None:
        return
    if state.latest_version < mark.version:
        raise CheckpointMismatchError(
            f"{prefix} was at version {mark.version}, but it is now at version {state.latest_version}: an older "
            f"copy replaced it, so work the checkpoint counts is missing. To rebuild it, {remedy}."
        )
    behind = [(version, to) for version, to in state.restores if to is None or to < mark.version]
    if behind:
        version, to = behind[0]
        restored = f"version {to}" if to is not None else "an earlier timestamp"
        raise CheckpointMismatchError(
            f"{prefix} was at version {mark.version}, but version {version} RESTOREd it to {restored}: work the "
            f"checkpoint counts was undone. To rebuild it, {remedy}."
        )


def names_or_none(document: dict[str, Any], name: str, where: str) -> tuple[str, ...] | None:
    value = document.get(name)
    if value is None:
        return None
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise CheckpointError(f"checkpoint {where}: {name} must be a list of column names, got {value!r}")
    return tuple(value)


def time_or_none(value: Any, where: str, name: str) -> datetime | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise CheckpointError(f"checkpoint {where}: {name} must be an ISO time string, got {value!r}")
    try:
        return parse_time(value)
    except ValueError:
        raise CheckpointError(f"checkpoint {where}: {name} {value!r} is not an ISO time") from None
