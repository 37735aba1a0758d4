"""A Delta CDF pipeline's checkpoint: the source version applied, the source and target it was made on."""

from __future__ import annotations

from dataclasses import dataclass, field

from lakefeed.checkpoint import (
    Moves,
    TableMark,
    dump_document,
    is_count,
    marks_json,
    names_or_none,
    parse_document,
    string_or_none,
    targets_from,
)
from lakefeed.errors import CheckpointError


@dataclass(frozen=True)
class CdfCheckpoint(Moves):
    """Every version up to ``applied_version`` of the source table ``source_id`` is in ``targets``
    (``applied_version`` None: nothing yet), shaped by ``keys`` and ``columns`` (the target's definition:
    key columns, and the selected source columns or None for all of them). ``keys`` None: not recorded
    (a checkpoint written before the definition was part of its identity)."""

    applied_version: int | None = None
    source: str | None = None
    source_id: str | None = None
    targets: dict[str, TableMark] = field(default_factory=dict)
    keys: tuple[str, ...] | None = None
    columns: tuple[str, ...] | None = None
    announced: dict[str, TableMark] = field(default_factory=dict)
    generation: int = 0
    updated_by: str | None = None

    @property
    def identity(self) -> str | None:
        """The source table it was made on (its Delta table id)."""
        return self.source_id

    def to_json(self) -> str:
        return dump_document(
            "delta_cdf",
            {
                "appliedVersion": self.applied_version,
                "source": self.source,
                "sourceTableId": self.source_id,
                "targets": marks_json(self.targets),
                "announced": marks_json(self.announced),
                "keys": list(self.keys) if self.keys is not None else None,
                "columns": list(self.columns) if self.columns is not None else None,
                "generation": self.generation,
                "updatedBy": self.updated_by,
            },
        )

    @classmethod
    def from_json(cls, text: str | None, where: str) -> CdfCheckpoint:
        document = parse_document(text, where, "delta_cdf")
        if document is None:
            return cls()
        applied = document.get("appliedVersion")
        if applied is not None and not is_count(applied):
            raise CheckpointError(f"checkpoint {where}: appliedVersion must be a version number, got {applied!r}")
        return cls(
            applied_version=applied,
            source=string_or_none(document, "source", where),
            source_id=string_or_none(document, "sourceTableId", where),
            targets=targets_from(document, where),
            announced=targets_from(document, where, "announced"),
            keys=names_or_none(document, "keys", where),
            columns=names_or_none(document, "columns", where),
            generation=document.get("generation", 0),
            updated_by=document.get("updatedBy"),
        )
