"""JVM-free, deferrable sensors, shaped like the Azure provider's WasbBlobSensor.

Each checks once in the worker; when nothing is ready it defers to a trigger,
so waiting holds no worker slot. A backfill run (its params name a range) has
nothing to wait for. When nothing becomes ready before the configured timeout
the run is skipped: nothing new this time.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta, timezone
from typing import Any

from airflow.sdk import BaseSensorOperator, Context

from lakefeed_airflow.triggers import ChangeFeedReadyTrigger, DeltaVersionTrigger, sources_behind


class _PollingSensor(BaseSensorOperator):
    template_fields: Sequence[str] = ("backfill",)

    def __init__(self, *, backfill: str = "", deferrable: bool = True, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.backfill = backfill  # rendered from the run's params: non-empty means "backfill run"
        self.deferrable = deferrable

    def _check(self) -> tuple[bool, dict[str, Any], Any]:
        """(ready, details, trigger factory taking a deadline) — reads configuration and checkpoints."""
        raise NotImplementedError

    def _timing(self) -> tuple[float, float]:
        """(poke interval, timeout) in seconds, from the pipeline's configuration."""
        raise NotImplementedError

    def poke(self, context: Context) -> bool:
        if self.backfill:
            return True
        ready, details, _ = self._check()
        self.log.info("checked: ready=%s %s", ready, details)
        return ready

    def execute(self, context: Context) -> Any:
        if not self.deferrable:
            return super().execute(context=context)
        if self.backfill:
            self.log.info("backfill run (%s): nothing to wait for", self.backfill)
            return None
        ready, details, make_trigger = self._check()
        self.log.info("checked: ready=%s %s", ready, details)
        if ready:
            return details
        _, timeout = self._timing()
        deadline = (datetime.now(timezone.utc) + timedelta(seconds=timeout)).strftime("%Y-%m-%dT%H:%M:%SZ")
        self.defer(
            trigger=make_trigger(deadline),
            method_name="execute_complete",
            timeout=timedelta(seconds=timeout + 300),  # the trigger gives up at its deadline; a backstop
        )

    def execute_complete(self, context: Context, event: dict[str, Any]) -> dict[str, Any]:
        from airflow.sdk.exceptions import AirflowSkipException

        status = event.get("status")
        if status == "ready":
            self.log.info("ready: %s", event)
            return event
        if status == "timeout":
            raise AirflowSkipException(f"nothing became ready before the sensor's deadline ({event}): "
                                       "nothing to ingest this run")
        raise RuntimeError(event.get("message") or f"unexpected trigger event {event!r}")


class ChangeFeedReadySensor(_PollingSensor):
    """Waits until a blob change feed window past the checkpoint is ready (reads ``meta/Segments.json``).

    A ``lastConsumable`` that moved backwards fails the task.
    """

    def _timing(self) -> tuple[float, float]:
        from lakefeed_airflow.settings import blob_config

        config = blob_config()
        return config.sensor_poke_seconds, config.sensor_timeout_seconds

    def _check(self):
        from lakefeed.blob.feed import ChangeFeed
        from lakefeed.blob.schedule import check_readiness
        from lakefeed.blob.timegrid import format_time, parse_time
        from lakefeed_airflow.wasb_feed import feed_store
        from lakefeed_airflow.settings import CheckpointStore, blob_config

        config = blob_config()
        checkpoint = CheckpointStore(config.checkpoint_variable).load()
        start_from = parse_time(config.start_from) if config.start_from else None
        readiness = check_readiness(ChangeFeed(feed_store(config.feed_root, config.wasb_conn_id)),
                                    checkpoint.watermark, checkpoint.last_consumable, start_from)

        def make_trigger(deadline: str) -> ChangeFeedReadyTrigger:
            return ChangeFeedReadyTrigger(
                feed_root=config.feed_root,
                wasb_conn_id=config.wasb_conn_id,
                watermark=format_time(checkpoint.watermark) if checkpoint.watermark else None,
                last_consumable_seen=format_time(checkpoint.last_consumable) if checkpoint.last_consumable else None,
                start_from=config.start_from,
                deadline=deadline,
                poke_interval=config.sensor_poke_seconds,
            )

        return readiness.ready, readiness.to_dict(), make_trigger


class DeltaVersionSensor(_PollingSensor):
    """Waits until a source table of any configured CDF pipeline has versions past its checkpoint
    (lists ``_delta_log``; never a JVM)."""

    def _timing(self) -> tuple[float, float]:
        from lakefeed_airflow.settings import cdf_config

        config = cdf_config()
        return config.sensor_poke_seconds, config.sensor_timeout_seconds

    def _check(self):
        from lakefeed_airflow.settings import cdf_checkpoint_store, cdf_config

        config = cdf_config()
        sources = [
            {"name": p.name, "source_table": p.source_table,
             "applied_version": cdf_checkpoint_store(p).load().applied_version}
            for p in config.pipelines
        ]
        behind = sources_behind(sources)

        def make_trigger(deadline: str) -> DeltaVersionTrigger:
            return DeltaVersionTrigger(sources=sources, deadline=deadline, poke_interval=config.sensor_poke_seconds)

        return bool(behind), {"behind": behind}, make_trigger
