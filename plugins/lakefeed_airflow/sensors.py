"""The blob change feed sensor: JVM-free, deferrable, shaped like the Azure provider's WasbBlobSensor."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta, timezone
from typing import Any

from airflow.sdk import BaseSensorOperator, Context

from lakefeed_airflow.triggers import ChangeFeedReadyTrigger


class ChangeFeedReadySensor(BaseSensorOperator):
    """Waits until a window past the checkpoint is ready in the feed.

    Reads ``meta/Segments.json`` (never a JVM). With ``deferrable=True`` the
    waiting happens in the triggerer and holds no worker slot. When the run
    is a backfill (``window_start``/``window_end`` params) there is nothing to
    wait for. When nothing becomes ready before ``timeout``, the run is
    skipped: no new data this hour. A ``lastConsumable`` that moved backwards
    fails the task.
    """

    template_fields: Sequence[str] = ("backfill_start", "backfill_end")

    def __init__(self, *, backfill_start: str | None = None, backfill_end: str | None = None,
                 deferrable: bool = True, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.backfill_start = backfill_start
        self.backfill_end = backfill_end
        self.deferrable = deferrable

    def _settings(self):
        from lakefeed_airflow.settings import CheckpointStore, blob_config

        config = blob_config()
        return config, CheckpointStore(config.checkpoint_variable).load()

    def _readiness(self):
        from lakefeed.blob.feed import ChangeFeed
        from lakefeed.blob.schedule import check_readiness
        from lakefeed.blob.timegrid import parse_time
        from lakefeed.storage import Store

        config, checkpoint = self._settings()
        start_from = parse_time(config.start_from) if config.start_from else None
        readiness = check_readiness(ChangeFeed(Store(config.feed_root)), checkpoint.watermark,
                                    checkpoint.last_consumable, start_from)
        return config, checkpoint, readiness

    def _is_backfill(self) -> bool:
        return bool(self.backfill_start or self.backfill_end)

    def poke(self, context: Context) -> bool:
        if self._is_backfill():
            return True
        _, _, readiness = self._readiness()
        self.log.info("feed readiness: %s", readiness.to_dict())
        return readiness.ready

    def execute(self, context: Context) -> Any:
        if not self.deferrable:
            return super().execute(context=context)
        if self._is_backfill():
            self.log.info("backfill run (%s .. %s): nothing to wait for", self.backfill_start, self.backfill_end)
            return None
        config, checkpoint, readiness = self._readiness()
        self.log.info("feed readiness: %s", readiness.to_dict())
        if readiness.ready:
            return readiness.to_dict()
        deadline = datetime.now(timezone.utc) + timedelta(seconds=config.sensor_timeout_seconds)
        self.defer(
            trigger=ChangeFeedReadyTrigger(
                feed_root=config.feed_root,
                watermark=_iso(checkpoint.watermark),
                last_consumable_seen=_iso(checkpoint.last_consumable),
                start_from=config.start_from,
                deadline=_iso(deadline),
                poke_interval=config.sensor_poke_seconds,
            ),
            method_name="execute_complete",
            # The trigger gives up at its own deadline; this is a backstop.
            timeout=timedelta(seconds=config.sensor_timeout_seconds + 300),
        )

    def execute_complete(self, context: Context, event: dict[str, Any]) -> dict[str, Any]:
        from airflow.sdk.exceptions import AirflowSkipException

        status = event.get("status")
        if status == "ready":
            self.log.info("window %s is ready (lastConsumable %s)", event.get("nextWindow"), event.get("lastConsumable"))
            return event
        if status == "timeout":
            raise AirflowSkipException(
                f"no window ready before the sensor's deadline (lastConsumable {event.get('lastConsumable')}, "
                f"next window {event.get('nextWindow')}): nothing to ingest this run"
            )
        raise RuntimeError(event.get("message") or f"unexpected trigger event {event!r}")


def _iso(moment: datetime | None) -> str | None:
    from lakefeed.blob.timegrid import format_time

    return format_time(moment) if moment else None
