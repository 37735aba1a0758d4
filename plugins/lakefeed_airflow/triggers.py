"""Deferrable waiting for the blob change feed: polls Segments.json in the triggerer, no worker slot."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import datetime, timezone
from typing import Any

from airflow.triggers.base import BaseTrigger, TriggerEvent


class ChangeFeedReadyTrigger(BaseTrigger):
    """Fires once a window past ``watermark`` is ready (``lastConsumable >= window + 1h``).

    Stores only primitives. Yields one event: ``ready``, ``timeout`` (at
    ``deadline``) or ``error`` (with a message naming the file at fault).

    :param feed_root: the ``$blobchangefeed`` container (folder or URL)
    :param watermark: ISO start of the first window not yet applied, or None
    :param last_consumable_seen: ISO lastConsumable stored with the checkpoint, or None
    :param start_from: ISO time before which windows are ignored on a first run, or None
    :param deadline: ISO time at which to give up
    :param poke_interval: seconds between polls
    """

    def __init__(self, *, feed_root: str, watermark: str | None, last_consumable_seen: str | None,
                 start_from: str | None, deadline: str, poke_interval: float = 60.0):
        super().__init__()
        self.feed_root = feed_root
        self.watermark = watermark
        self.last_consumable_seen = last_consumable_seen
        self.start_from = start_from
        self.deadline = deadline
        self.poke_interval = poke_interval

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            "lakefeed_airflow.triggers.ChangeFeedReadyTrigger",
            {
                "feed_root": self.feed_root,
                "watermark": self.watermark,
                "last_consumable_seen": self.last_consumable_seen,
                "start_from": self.start_from,
                "deadline": self.deadline,
                "poke_interval": self.poke_interval,
            },
        )

    async def run(self) -> AsyncIterator[TriggerEvent]:
        from lakefeed.blob.timegrid import parse_time
        from lakefeed.errors import FeedError

        deadline = parse_time(self.deadline)
        while True:
            try:
                readiness = await asyncio.to_thread(self._check)
            except FeedError as exc:
                yield TriggerEvent({"status": "error", "message": f"{type(exc).__name__}: {exc}"})
                return
            if readiness.ready:
                yield TriggerEvent({"status": "ready", **readiness.to_dict()})
                return
            if datetime.now(timezone.utc) >= deadline:
                yield TriggerEvent({"status": "timeout", **readiness.to_dict()})
                return
            self.log.info("no window ready yet (lastConsumable %s, next window %s); sleeping %ss",
                          readiness.to_dict()["lastConsumable"], readiness.to_dict()["nextWindow"],
                          self.poke_interval)
            await asyncio.sleep(self.poke_interval)

    def _check(self):
        from lakefeed.blob.feed import ChangeFeed
        from lakefeed.blob.schedule import check_readiness
        from lakefeed.blob.timegrid import parse_time
        from lakefeed.storage import Store

        def time_or_none(text):
            return parse_time(text) if text else None

        return check_readiness(ChangeFeed(Store(self.feed_root)), time_or_none(self.watermark),
                               time_or_none(self.last_consumable_seen), time_or_none(self.start_from))
