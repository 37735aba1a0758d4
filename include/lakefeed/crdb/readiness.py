"""Does the CockroachDB changefeed's sink have a RESOLVED file newer than the checkpoint? What the DAG's
sensor checks once before it waits (:meth:`lakefeed.crdb.pipeline.CrdbHooks.watch`) and what it, and its trigger in the triggerer, then polls
(:func:`ready`): lists the sink from the checkpoint's partition on, never a JVM."""

from __future__ import annotations

from typing import Any

from lakefeed import pipeline as skeleton
from lakefeed.checkpoint import verify_feed
from lakefeed.crdb.hlc import Hlc
from lakefeed.crdb.pipeline import RESET_REMEDY
from lakefeed.crdb.sink import require_sink, resolved_stamps


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
    newer = resolved_stamps(store, cursor, after=cursor)
    return bool(newer), {"resolved": resolved, "newestResolved": str(max(newer)) if newer else resolved}
