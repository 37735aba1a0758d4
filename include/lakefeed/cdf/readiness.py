"""Has a CDF pipeline's source table versions past its checkpoint? What the DAG's sensor checks once before it
waits (:func:`watch`) and what it, and its trigger in the triggerer, then polls (:func:`ready`): lists
``_delta_log``, never a JVM."""

from __future__ import annotations

from typing import Any

from lakefeed import pipeline as skeleton
from lakefeed.cdf.checkpoint import CdfCheckpoint
from lakefeed.cdf.config import CdfPipeline
from lakefeed.cdf.pipeline import refresh_remedy, verify_definition_of, verify_source
from lakefeed.deltalog import DeltaLog
from lakefeed.targets import verify_targets


def source_of(pipeline: CdfPipeline) -> dict[str, Any]:
    """What :func:`watch` reads of a pipeline's configuration."""
    return {
        "name": pipeline.name,
        "source_table": pipeline.source_table,
        "target_table": pipeline.target_table,
        "checkpoint_variable": pipeline.checkpoint_variable,
        "keys": pipeline.keys,
        "columns": pipeline.columns,
        "wasb_conn_id": pipeline.wasb_conn_id,
    }


def watch(checkpoint: CdfCheckpoint, source: dict[str, Any], storage: skeleton.Storage) -> dict[str, Any]:
    """What :func:`ready` polls of one pipeline (primitives: a trigger stores them), from its checkpoint;
    ``source``: ``{"name", "source_table", "target_table", "checkpoint_variable", "keys", "columns",
    "wasb_conn_id"}``. Refuses a target dropped, recreated or restored behind the checkpoint, and keys or
    columns other than the checkpoint's."""
    where = f"Variable {source['checkpoint_variable']}"
    with storage.scope(source.get("wasb_conn_id")):
        verify_targets(checkpoint.targets, {"target": source["target_table"]}, where, refresh_remedy(source["name"]))
    if "keys" in source:
        verify_definition_of(source["name"], checkpoint, source["keys"], source.get("columns"), where)
    return {key: source[key] for key in ("name", "source_table", "checkpoint_variable")} | {
        "applied_version": checkpoint.applied_version,
        "source_table_id": checkpoint.source_id,
        "wasb_conn_id": source.get("wasb_conn_id"),
    }


def sources_behind(sources: list[dict[str, Any]], storage: skeleton.Storage) -> dict[str, dict[str, Any]]:
    """The sources (:func:`watch`'s) whose latest version (from ``_delta_log``) is past their applied version.
    A source that is not the table its checkpoint recorded (dropped and recreated, or an older copy) is
    refused, naming it."""
    behind = {}
    for source in sources:
        applied = source["applied_version"]
        state = verify_source(
            source["name"],
            source["source_table"],
            source["checkpoint_variable"],
            source.get("source_table_id"),
            applied,
            DeltaLog(storage.table(source["source_table"], source.get("wasb_conn_id"))),
        )
        if state is not None and (applied is None or state.latest_version > applied):
            behind[source["name"]] = {"latest": state.latest_version, "applied": applied}
    return behind


def ready(storage: skeleton.Storage, *, sources: list[dict[str, Any]]) -> tuple[bool, dict[str, Any]]:
    """Is any source behind?"""
    behind = sources_behind(sources, storage)
    return bool(behind), {"behind": behind}
