"""Deferrable waiting in the triggerer (no worker slot): poll cheap JSON until something is ready.

Triggers store only primitives; each yields exactly one event: ``ready``,
``timeout`` (at ``deadline``), ``refused`` (the checkpoint does not belong to
what is polled, or the feed went backwards: a message naming it) or ``error``.
The sensors call the same check functions before deferring.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

from airflow.triggers.base import BaseTrigger, TriggerEvent


class _PollingTrigger(BaseTrigger):
    """Calls ``_check()`` (blocking I/O, in a thread) every ``poke_interval`` seconds until ``deadline``."""

    def __init__(self, *, deadline: str, poke_interval: float = 60.0):
        super().__init__()
        self.deadline = deadline
        self.poke_interval = poke_interval

    def _check(self) -> tuple[bool, dict[str, Any]]:
        raise NotImplementedError

    async def run(self) -> AsyncIterator[TriggerEvent]:
        from lakefeed.errors import Refusal
        from lakefeed.times import parse_time

        deadline = parse_time(self.deadline)
        while True:
            try:
                ready, details = await asyncio.to_thread(self._check)
            except Refusal as exc:
                yield TriggerEvent({"status": "refused", "message": f"{type(exc).__name__}: {exc}"})
                return
            except (OSError, ValueError, RecursionError) as exc:
                yield TriggerEvent({"status": "error", "message": f"{type(exc).__name__}: {exc}"})
                return
            if ready:
                yield TriggerEvent({"status": "ready", **details})
                return
            if datetime.now(UTC) >= deadline:
                yield TriggerEvent({"status": "timeout", **details})
                return
            self.log.info("nothing ready yet (%s); sleeping %ss", details, self.poke_interval)
            await asyncio.sleep(self.poke_interval)


def feed_readiness(
    *,
    feed_root: str,
    wasb_conn_id: str | None,
    watermark: str | None,
    last_consumable_seen: str | None,
    start_from: str | None,
    feed_identity: str | None,
    checkpoint_variable: str,
) -> tuple[bool, dict[str, Any]]:
    """Is a blob change feed window past the watermark ready? Refuses a checkpoint of another feed."""
    from lakefeed.blob.feed import ChangeFeed
    from lakefeed.blob.pipeline import RESET_REMEDY
    from lakefeed.blob.schedule import check_readiness
    from lakefeed.checkpoint import verify_feed
    from lakefeed.times import parse_time
    from lakefeed_airflow.wasb_feed import feed_store

    def time_or_none(text):
        return parse_time(text) if text else None

    store = feed_store(feed_root, wasb_conn_id)
    verify_feed(feed_identity, store.identity, f"Variable {checkpoint_variable}", RESET_REMEDY)
    readiness = check_readiness(
        ChangeFeed(store), time_or_none(watermark), time_or_none(last_consumable_seen), time_or_none(start_from)
    )
    return readiness.ready, readiness.to_dict()


class ChangeFeedReadyTrigger(_PollingTrigger):
    """Fires once a blob change feed window past ``watermark`` is ready (``lastConsumable >= window + 1h``).

    :param feed_root: the ``$blobchangefeed`` container (folder or URL)
    :param wasb_conn_id: read the feed through this Azure connection, or None
    :param watermark: ISO start of the first window not yet applied, or None
    :param last_consumable_seen: ISO lastConsumable stored with the checkpoint, or None
    :param start_from: ISO time before which windows are ignored on a first run, or None
    :param feed_identity: the feed the checkpoint was made on (refused if it is not this one), or None
    :param checkpoint_variable: the checkpoint's Variable (named in refusals)
    :param deadline: ISO time at which to give up
    :param poke_interval: seconds between polls
    """

    def __init__(
        self,
        *,
        feed_root: str,
        watermark: str | None,
        last_consumable_seen: str | None,
        start_from: str | None,
        deadline: str,
        poke_interval: float = 60.0,
        wasb_conn_id: str | None = None,
        feed_identity: str | None = None,
        checkpoint_variable: str = "lakefeed_blob_checkpoint",
    ):
        super().__init__(deadline=deadline, poke_interval=poke_interval)
        self.feed_root = feed_root
        self.wasb_conn_id = wasb_conn_id
        self.watermark = watermark
        self.last_consumable_seen = last_consumable_seen
        self.start_from = start_from
        self.feed_identity = feed_identity
        self.checkpoint_variable = checkpoint_variable

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            "lakefeed_airflow.triggers.ChangeFeedReadyTrigger",
            {
                "feed_root": self.feed_root,
                "wasb_conn_id": self.wasb_conn_id,
                "watermark": self.watermark,
                "last_consumable_seen": self.last_consumable_seen,
                "start_from": self.start_from,
                "feed_identity": self.feed_identity,
                "checkpoint_variable": self.checkpoint_variable,
                "deadline": self.deadline,
                "poke_interval": self.poke_interval,
            },
        )

    def _check(self) -> tuple[bool, dict[str, Any]]:
        return feed_readiness(
            feed_root=self.feed_root,
            wasb_conn_id=self.wasb_conn_id,
            watermark=self.watermark,
            last_consumable_seen=self.last_consumable_seen,
            start_from=self.start_from,
            feed_identity=self.feed_identity,
            checkpoint_variable=self.checkpoint_variable,
        )


class DeltaVersionTrigger(_PollingTrigger):
    """Fires once any source table has a version past its pipeline's applied version.

    :param sources: ``[{"name", "source_table", "checkpoint_variable", "applied_version": int | None,
        "source_table_id": str | None}, …]``
    :param deadline: ISO time at which to give up
    :param poke_interval: seconds between polls
    """

    def __init__(self, *, sources: list[dict[str, Any]], deadline: str, poke_interval: float = 60.0):
        super().__init__(deadline=deadline, poke_interval=poke_interval)
        self.sources = sources

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            "lakefeed_airflow.triggers.DeltaVersionTrigger",
            {"sources": self.sources, "deadline": self.deadline, "poke_interval": self.poke_interval},
        )

    def _check(self) -> tuple[bool, dict[str, Any]]:
        behind = sources_behind(self.sources)
        return bool(behind), {"behind": behind}


def sources_behind(sources: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The sources whose latest version (from ``_delta_log``) is past their applied version. A source that
    is not the table its checkpoint recorded (dropped and recreated, or an older copy) is refused, naming it."""
    from lakefeed.cdf.pipeline import verify_source
    from lakefeed.deltalog import DeltaLog
    from lakefeed_airflow.wasb_feed import location_store

    behind = {}
    for source in sources:
        applied = source["applied_version"]
        store = location_store(source["source_table"], source.get("wasb_conn_id"))
        state = verify_source(
            source["name"],
            source["source_table"],
            source["checkpoint_variable"],
            source.get("source_table_id"),
            applied,
            DeltaLog(store),
        )
        if state is not None and (applied is None or state.latest_version > applied):
            behind[source["name"]] = {"latest": state.latest_version, "applied": applied}
    return behind


def resolved_readiness(
    *,
    sink_root: str,
    wasb_conn_id: str | None,
    resolved: str | None,
    sink_identity: str | None,
    checkpoint_variable: str,
) -> tuple[bool, dict[str, Any]]:
    """Is there a RESOLVED file newer than the checkpoint? Lists the sink from the checkpoint's partition
    on (never the whole sink); refuses a checkpoint of another sink."""
    from lakefeed.checkpoint import verify_feed
    from lakefeed.crdb.hlc import Hlc
    from lakefeed.crdb.pipeline import RESET_REMEDY
    from lakefeed.crdb.sink import RESOLVED, list_sink, require_sink
    from lakefeed_airflow.wasb_feed import feed_store

    store = feed_store(sink_root, wasb_conn_id)
    verify_feed(sink_identity, store.identity, f"Variable {checkpoint_variable}", RESET_REMEDY)
    require_sink(store)
    cursor = Hlc.parse(resolved) if resolved else None
    newer = [
        f.timestamp for f in list_sink(store, cursor) if f.kind == RESOLVED and (cursor is None or f.timestamp > cursor)
    ]
    return bool(newer), {"resolved": resolved, "newestResolved": str(max(newer)) if newer else resolved}


class ResolvedTimestampTrigger(_PollingTrigger):
    """Fires once the CockroachDB changefeed sink has a RESOLVED file newer than the checkpoint.

    :param sink_root: the changefeed's sink path (folder or URL)
    :param wasb_conn_id: read an Azure sink through this connection, or None
    :param resolved: the checkpoint's RESOLVED timestamp, or None
    :param sink_identity: the sink the checkpoint was made on (refused if it is not this one), or None
    :param checkpoint_variable: the checkpoint's Variable (named in refusals)
    :param deadline: ISO time at which to give up
    :param poke_interval: seconds between polls
    """

    def __init__(
        self,
        *,
        sink_root: str,
        resolved: str | None,
        deadline: str,
        poke_interval: float = 60.0,
        wasb_conn_id: str | None = None,
        sink_identity: str | None = None,
        checkpoint_variable: str = "lakefeed_crdb_checkpoint",
    ):
        super().__init__(deadline=deadline, poke_interval=poke_interval)
        self.sink_root = sink_root
        self.wasb_conn_id = wasb_conn_id
        self.resolved = resolved
        self.sink_identity = sink_identity
        self.checkpoint_variable = checkpoint_variable

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            "lakefeed_airflow.triggers.ResolvedTimestampTrigger",
            {
                "sink_root": self.sink_root,
                "wasb_conn_id": self.wasb_conn_id,
                "resolved": self.resolved,
                "sink_identity": self.sink_identity,
                "checkpoint_variable": self.checkpoint_variable,
                "deadline": self.deadline,
                "poke_interval": self.poke_interval,
            },
        )

    def _check(self) -> tuple[bool, dict[str, Any]]:
        return resolved_readiness(
            sink_root=self.sink_root,
            wasb_conn_id=self.wasb_conn_id,
            resolved=self.resolved,
            sink_identity=self.sink_identity,
            checkpoint_variable=self.checkpoint_variable,
        )
