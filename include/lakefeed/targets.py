"""The Delta tables behind a checkpoint, read from their logs (no JVM): marks to record after work was
applied, and the check that they are still the tables the checkpoint was made on."""

from __future__ import annotations

import json
from typing import Any

from lakefeed.checkpoint import TableMark, verify_table
from lakefeed.deltalog import DeltaLog, TableState, changes_rows
from lakefeed.errors import CheckpointMismatchError
from lakefeed.storage import Store

PIPELINE_ID = "pipelineId"  # the userMetadata key naming the pipeline (its checkpoint Variable) that wrote a commit


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
                    f"or {remedy}."
                )
            continue
        verify_table(role, location, None, mark, table_state(location, restores_after=mark.version), where, remedy)


def foreign_write(location: str, pipeline_id: str, after: int = -1) -> str | None:
    """Why the Delta table at ``location`` holds rows this pipeline did not write (None: it holds none, or
    every commit that changed its data carries ``pipelineId = pipeline_id`` in its ``userMetadata``), looking
    at the commits after version ``after`` (-1: the whole log). Commits log cleanup removed cannot show their
    writer, so a gap is a reason too.

    Reads those commits of the log (JVM-free). Called for a first run (the whole log), so it never MERGEs
    into a table another tool, or this pipeline under another checkpoint, filled; and after a recorded mark,
    so a table someone else changed since is not taken for the pipeline's own."""
    delta_log = DeltaLog(Store(location))
    versions = [v for v in delta_log.commit_versions() if v > after]
    if not versions:
        return None
    if versions[0] != after + 1:
        return (
            f"its log no longer holds versions {after + 1}..{versions[0] - 1} (log cleanup), so who wrote its "
            f"rows cannot be shown"
        )
    for version in versions:
        actions = delta_log.actions(version)
        if not changes_rows(actions):
            continue
        info: dict[str, Any] = next((action["commitInfo"] for action in actions if "commitInfo" in action), {})
        if _writer(info.get("userMetadata")) != pipeline_id:
            return f"version {version} ({info.get('operation') or 'a commit'}) changed its rows, written by {written_by(info)}"
    return None


def changed_by_others(location: str, pipeline_id: str, mark: TableMark | None) -> str | None:
    """Why the table at ``location`` is not, since ``mark`` (None: ever), only the pipeline's own work: it
    is gone, another table took its place (a lower version, or another table id as of the mark's version: a
    REPLACE after the mark keeps the log, and so the mark's place in it), or another writer changed its rows
    after the mark (:func:`foreign_write`). None when it is."""
    if mark is None:
        return foreign_write(location, pipeline_id)
    delta_log = DeltaLog(Store(location))
    versions = delta_log.commit_versions()
    if not versions:
        return "there is no Delta table there any more (dropped or moved)"
    if versions[-1] < mark.version:
        return (
            f"it is at version {versions[-1]}, below version {mark.version} it was at: another table (or an "
            "older copy) took its place"
        )
    if mark.version >= versions[0] and delta_log.table_id(mark.version) != mark.table_id:
        return f"it is another table than the one at version {mark.version} (dropped and recreated)"
    return foreign_write(location, pipeline_id, mark.version)


def verify_own_writes(recorded: dict[str, TableMark], pipeline_id: str, where: str, adopt: str, remedy: str) -> None:
    """Refuse targets that are not the pipeline's own work since the checkpoint's marks
    (:func:`changed_by_others`): the checkpoint says a target holds what the feed says through its mark, and
    rows another tool (or another pipeline pointed at the same table) inserted, updated or deleted since
    make that untrue. Commits that change no rows (OPTIMIZE, VACUUM, properties) pass. ``adopt`` says how to
    accept the tables as they are now."""
    for location, mark in sorted(recorded.items()):
        reason = changed_by_others(location, pipeline_id, mark)
        if reason is not None:
            raise CheckpointMismatchError(
                f"checkpoint {where} says the target {location} holds only this pipeline's work through version "
                f"{mark.version}, but since then {reason}. To accept the table as it is now, {adopt}; to rebuild "
                f"it, {remedy}."
            )


def verify_unchanged_during_run(
    planned_marks: dict[str, TableMark], locations: list[str], pipeline_id: str, where: str, adopt: str, remedy: str
) -> None:
    """Refuse, at the end of a run, targets that stopped being the pipeline's own work while it ran: since
    the mark its plan saw (``planned_marks``; none: the table was not there, so ever). The plan made its own
    checks up to then."""
    for location in sorted(set(locations)):
        mark = planned_marks.get(location)
        reason = changed_by_others(location, pipeline_id, mark)
        if reason is not None:
            since = f"version {mark.version}, where the run's plan saw it" if mark else "the run's plan"
            raise CheckpointMismatchError(
                f"checkpoint {where} was left as it was: the target {location} changed under this run: since "
                f"{since}, {reason}. To accept the table as it is now, {adopt}; to rebuild it, {remedy}."
            )


def written_by(commit_info: dict[str, Any]) -> str:
    """Who made a commit, for a message: the pipeline its ``userMetadata`` names, or the engine."""
    writer = _writer(commit_info.get("userMetadata"))
    return f"pipeline {writer}" if writer else f"another writer ({commit_info.get('engineInfo') or 'unknown engine'})"


def user_metadata(commit_info: dict[str, Any]) -> dict[str, Any]:
    """The ``userMetadata`` a lakefeed job tagged a commit with (:func:`lakefeed.delta.tagged_write`), or {}."""
    text = commit_info.get("userMetadata")
    if not text:
        return {}
    try:
        document = json.loads(text)
    except (TypeError, ValueError):
        return {}
    return document if isinstance(document, dict) else {}


def _writer(user_metadata_text: Any) -> str | None:
    return user_metadata({"userMetadata": user_metadata_text}).get(PIPELINE_ID)


def rebuilt_after(location: str, version: int | None, marker: str) -> int | None:
    """The first commit of the table at ``location`` after ``version`` whose ``userMetadata`` holds
    ``marker`` (a rebuild, e.g. a CDF full refresh's ``fullRefreshVersion``), or None. JVM-free."""
    if version is None:
        return None
    for info in DeltaLog(Store(location)).history(version):
        if marker in user_metadata(info):
            return int(info["version"])
    return None


def tables_under(root: str) -> list[str]:
    """The Delta tables directly under ``root`` (folders holding a ``_delta_log``), e.g. a CockroachDB
    pipeline's topic tables and its ledger of applied files."""
    store = Store(root)
    return [
        f"{store.root}/{entry.name}"
        for entry in store.list("")
        if entry.is_dir and any(e.name == "_delta_log" for e in store.list(entry.name))
    ]


def verify_adoptable(locations: list[str], pipeline_id: str, where: str, adopt_param: str) -> None:
    """With an empty checkpoint, refuse targets that already hold rows written by anything but this pipeline:
    a first run would MERGE into them as if they were its own. ``adopt_param`` names the param that adopts
    them."""
    for location in locations:
        reason = foreign_write(location, pipeline_id)
        if reason is not None:
            raise CheckpointMismatchError(
                f"checkpoint {where} is empty, but the target {location} already holds rows: {reason}. This "
                f"pipeline writes only tables it made or adopted. Point the configuration at a new location, or, "
                f"to merge into this table as it is, trigger the DAG once with the param {adopt_param}=true."
            )
