"""The CockroachDB pipeline's checkpoint: the RESOLVED timestamp applied, the sink and tables it was made on."""

from __future__ import annotations

from dataclasses import dataclass, field

from lakefeed.checkpoint import (
    Moves,
    TableMark,
    dump_document,
    marks_json,
    parse_document,
    string_or_none,
    targets_from,
)
from lakefeed.errors import CheckpointError


@dataclass(frozen=True)
class CrdbCheckpoint(Moves):
    """Every data file of the sink ``sink`` up to the RESOLVED file at ``resolved`` is in the topic tables
    ``targets``, all under ``target_root`` (``resolved`` None: nothing yet; ``target_root`` None: not
    recorded, a checkpoint written before it was)."""

    resolved: str | None = None
    sink: str | None = None
    targets: dict[str, TableMark] = field(default_factory=dict)
    target_root: str | None = None
    announced: dict[str, TableMark] = field(default_factory=dict)
    generation: int = 0
    updated_by: str | None = None

    @property
    def identity(self) -> str | None:
        """The sink it was made on (its storage identity)."""
        return self.sink

    def to_json(self) -> str:
        return dump_document(
            "cockroach_changefeed",
            {
                "resolved": self.resolved,
                "sink": self.sink,
                "targetRoot": self.target_root,
                "targets": marks_json(self.targets),
                "announced": marks_json(self.announced),
                "generation": self.generation,
                "updatedBy": self.updated_by,
            },
        )

    @classmethod
    def from_json(cls, text: str | None, where: str) -> CrdbCheckpoint:
        document = parse_document(text, where, "cockroach_changefeed")
        if document is None:
            return cls()
        resolved = string_or_none(document, "resolved", where)
        if resolved is not None:
            from lakefeed.crdb.hlc import Hlc

            try:
                Hlc.parse(resolved)
            except ValueError:
                raise CheckpointError(f"checkpoint {where}: resolved {resolved!r} is not <wall>.<logical>") from None
        return cls(
            resolved=resolved,
            sink=string_or_none(document, "sink", where),
            targets=targets_from(document, where),
            target_root=string_or_none(document, "targetRoot", where),
            announced=targets_from(document, where, "announced"),
            generation=document.get("generation", 0),
            updated_by=document.get("updatedBy"),
        )
