"""The Delta tables behind a checkpoint, read from their logs (no JVM): marks to record after work was
applied, and the check that they are still the tables the checkpoint was made on."""

from __future__ import annotations

from lakefeed.checkpoint import TableMark, verify_table
from lakefeed.deltalog import DeltaLog, TableState
from lakefeed.errors import CheckpointMismatchError
from lakefeed.storage import Store


def table_state(location: str, restores_after: int | None = None) -> TableState | None:
    return DeltaLog(Store(location)).state(restores_after)


def current_marks(locations: list[str]) -> dict[str, TableMark]:
    """What a checkpoint records of its targets after a run applied work: each table's id and version."""
    marks = {}
    for location in locations:
        mark = TableMark.of(table_state(location))
        if mark is not None:
            marks[location] = mark
    return marks


def verify_targets(recorded: dict[str, TableMark], targets: dict[str, str], where: str, remedy: str) -> None:
    """Refuse when a configured target (``{role: location}``) is not a table the checkpoint recorded, or
    was dropped, recreated or restored behind it (:func:`lakefeed.checkpoint.verify_table`)."""
    for role, location in targets.items():
        mark = recorded.get(location)
        if mark is None:
            if recorded:
                raise CheckpointMismatchError(
                    f"checkpoint {where} was made writing to {', '.join(sorted(recorded))}, but the {role} table is "
                    f"now configured as {location}, which holds none of that work. Point the configuration back, "
                    f"or {remedy}.")
            continue
        verify_table(role, location, None, mark, table_state(location, restores_after=mark.version), where, remedy)
