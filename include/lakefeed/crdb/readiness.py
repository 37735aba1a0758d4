"""Does the CockroachDB changefeed's sink have a RESOLVED file newer than the checkpoint? What the DAG's
sensor checks once before it waits (:func:`watch`) and what it, and its trigger in the triggerer, then polls
(:func:`ready`): lists the sink from the checkpoint's partition on, never a JVM."""

from __future__ import annotations

from typing import Any

from lakefeed import pipeline as skeleton
from lakefeed.checkpoint import verify_definition, verify_feed
from lakefeed.crdb.checkpoint import CrdbCheckpoint
from lakefeed.crdb.hlc import Hlc
from lakefeed.crdb.pipeline import RESET_REMEDY, recorded_root, root_of
from lakefeed.crdb.sink import RESOLVED, list_sink, require_sink
from lakefeed.targets import verify_targets


def watch(
    checkpoint: CrdbCheckpoint,
    *,
    sink_root: str,
    wasb_conn_id: str | None,
    target_root: str | None,
    checkpoint_variable: str,
) -> dict[str, Any]:
    """What :func:`ready` polls (primitives: a trigger stores them), from the checkpoint; refuses a
    ``target_root`` other than the checkpoint's (when given) and topic tables dropped, recreated or restored
    behind it."""
    where = f"Variable {checkpoint_variable}"
    if target_root:
        verify_definition("target_root", recorded_root(checkpoint), root_of(target_root), where, RESET_REMEDY)
    verify_targets(
        checkpoint.targets, {f"topic {t.rsplit('/', 1)[-1]}": t for t in checkpoint.targets}, where, RESET_REMEDY
    )
    return {
        "sink_root": sink_root,
        "wasb_conn_id": wasb_conn_id,
        "resolved": checkpoint.resolved,
        "sink_identity": checkpoint.sink,
        "checkpoint_variable": checkpoint_variable,
    }


def ready(
    storage: skeleton.Storage,
    *,
    sink_root: str,
    resolved: str | None,
    wasb_conn_id: str | None = None,
    sink_identity: str | None = None,
    checkpoint_variable: str = "lakefeed_crdb_checkpoint",
) -> tuple[bool, dict[str, Any]]:
    """Is there a RESOLVED file newer than ``resolved``? Refuses a checkpoint of another sink."""
    store = storage.feed(sink_root, wasb_conn_id)
    verify_feed(sink_identity, store.identity, f"Variable {checkpoint_variable}", RESET_REMEDY)
    require_sink(store)
    cursor = Hlc.parse(resolved) if resolved else None
    newer = [
        f.timestamp for f in list_sink(store, cursor) if f.kind == RESOLVED and (cursor is None or f.timestamp > cursor)
    ]
    return bool(newer), {"resolved": resolved, "newestResolved": str(max(newer)) if newer else resolved}
