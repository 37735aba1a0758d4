"""Is a blob change feed window past the checkpoint ready? What the DAG's sensor checks once before it waits
(:meth:`lakefeed.blob.pipeline.BlobHooks.watch`) and what it, and its trigger in the triggerer, then polls
(:func:`ready`): reads
``meta/Segments.json`` (and, before a first run, the lowest segment folders), never a JVM."""

from __future__ import annotations

from typing import Any

from lakefeed import pipeline as skeleton
from lakefeed.blob.checkpoint import BlobCheckpoint
from lakefeed.blob.config import BlobPipelineConfig
from lakefeed.blob.feed import ChangeFeed
from lakefeed.blob.pipeline import RESET_REMEDY
from lakefeed.blob.schedule import check_readiness
from lakefeed.checkpoint import verify_feed
from lakefeed.times import format_time, parse_time


def watched(config: BlobPipelineConfig, checkpoint: BlobCheckpoint) -> dict[str, Any]:
    """What :func:`ready` polls (primitives: a trigger stores them), from the configuration and checkpoint
    (which :meth:`lakefeed.blob.pipeline.BlobHooks.watch` checked first)."""
    return {
        "feed_root": config.feed_root,
        "wasb_conn_id": config.wasb_conn_id,
        "watermark": format_time(checkpoint.watermark) if checkpoint.watermark else None,
        "last_consumable_seen": format_time(checkpoint.last_consumable) if checkpoint.last_consumable else None,
        "start_from": config.start_from,
        "feed_identity": checkpoint.feed,
        "checkpoint_variable": config.checkpoint_variable,
    }


def ready(
    storage: skeleton.Storage,
    *,
    feed_root: str,
    watermark: str | None,
    last_consumable_seen: str | None,
    start_from: str | None,
    wasb_conn_id: str | None = None,
    feed_identity: str | None = None,
    checkpoint_variable: str = "lakefeed_blob_checkpoint",
) -> tuple[bool, dict[str, Any]]:
    """Is a window past ``watermark`` ready (``lastConsumable >= window + 1h``)? Refuses a checkpoint of
    another feed and a ``lastConsumable`` that moved backwards."""
    store = storage.feed(feed_root, wasb_conn_id)
    verify_feed(feed_identity, store.identity, f"Variable {checkpoint_variable}", RESET_REMEDY)
    readiness = check_readiness(ChangeFeed(store), _time(watermark), _time(last_consumable_seen), _time(start_from))
    return readiness.ready, readiness.to_dict()


def _time(text: str | None) -> Any:
    return parse_time(text) if text else None
