"""Deferrable waiting in the triggerer (no worker slot): poll cheap JSON until something is ready.

A feed's trigger (:class:`FeedReadinessTrigger`) polls its library readiness check (``FeedHooks.readiness``)
with the arguments its sensor's ``watch`` step found, through Airflow's ``wasb`` connections. Triggers store only
primitives; each yields exactly one event: ``ready``, ``timeout`` (at ``deadline``), ``refused`` (the
checkpoint does not belong to what is polled, or the feed went backwards: a message naming it) or ``error``.
The sensors call the same check functions before deferring.
"""

from __future__ import annotations

import asyncio
import importlib
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any, ClassVar

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


def readiness_check(path: str) -> Any:
    """A feed's readiness function by ``module:function`` (imported when first polled, not when DAGs parse)."""
    module, name = path.split(":")
    return getattr(importlib.import_module(module), name)


class FeedReadinessTrigger(_PollingTrigger):
    """Polls ``readiness`` (``module:function`` of a feed's ``ready(storage, **watched)``:
    ``FeedHooks.readiness``) with the keyword arguments it was given (what the sensor's ``watch`` step
    found), through the ``wasb`` connections."""

    READINESS: ClassVar[str | None] = None  # the feed triggers of earlier releases name theirs (deferred runs)

    def __init__(self, *, deadline: str, poke_interval: float = 60.0, readiness: str | None = None, **watched: Any):
        super().__init__(deadline=deadline, poke_interval=poke_interval)
        self.readiness = readiness or self.READINESS
        if self.readiness is None:
            raise ValueError("a FeedReadinessTrigger needs the feed's readiness check (module:function)")
        self.watched = watched

    def serialize(self) -> tuple[str, dict[str, Any]]:
        named = {} if self.READINESS else {"readiness": self.readiness}
        return (
            f"{type(self).__module__}.{type(self).__qualname__}",
            {**named, **self.watched, "deadline": self.deadline, "poke_interval": self.poke_interval},
        )

    @classmethod
    def check(cls, watched: dict[str, Any], readiness: str | None = None) -> tuple[bool, dict[str, Any]]:
        """One poll: the feed's readiness over ``watched``."""
        from lakefeed_airflow.wasb_feed import AIRFLOW_STORAGE

        ready = readiness_check(readiness or cls.READINESS or "")
        return ready(AIRFLOW_STORAGE, **watched)

    def _check(self) -> tuple[bool, dict[str, Any]]:
        return self.check(self.watched, self.readiness)


class ChangeFeedReadyTrigger(FeedReadinessTrigger):
    """Fires once a blob change feed window past ``watermark`` is ready (``lastConsumable >= window + 1h``):
    :func:`lakefeed.blob.readiness.ready`'s arguments (``feed_root``, ``wasb_conn_id``, ``watermark``,
    ``last_consumable_seen``, ``start_from``, ``feed_identity``, ``checkpoint_variable``), ``deadline``,
    ``poke_interval``."""

    READINESS = "lakefeed.blob.readiness:ready"


class DeltaVersionTrigger(FeedReadinessTrigger):
    """Fires once any source table has a version past its pipeline's applied version: ``sources`` as
    :func:`lakefeed.cdf.readiness.watch` gives them, ``deadline``, ``poke_interval``."""

    READINESS = "lakefeed.cdf.readiness:ready"


class ResolvedTimestampTrigger(FeedReadinessTrigger):
    """Fires once the CockroachDB changefeed sink has a RESOLVED file newer than the checkpoint:
    :func:`lakefeed.crdb.readiness.ready`'s arguments (``sink_root``, ``wasb_conn_id``, ``resolved``,
    ``sink_identity``, ``checkpoint_variable``), ``deadline``, ``poke_interval``."""

    READINESS = "lakefeed.crdb.readiness:ready"
