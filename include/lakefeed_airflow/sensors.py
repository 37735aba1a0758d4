"""The JVM-free, deferrable sensor every lakefeed DAG waits with (:class:`FeedReadySensor`): it reads its
feed's configuration and checkpoints when it runs (never while the DAG file is parsed), besides its source.

Each checks once in the worker. Only a scheduled run waits: when nothing is
ready it defers to a trigger, so waiting holds no worker slot, and when nothing
becomes ready before ``timeout_seconds`` the run is skipped (nothing new this
hour). Any other run with nothing to do (a manual trigger, ``airflow dags
test``) is skipped at once as up to date: a person waiting for it learns so in
seconds, not after the sensor's timeout. A run that is not waiting for new data
(a backfill, a reset: ``skip_reason`` renders non-empty) passes at once. A
checkpoint that belongs to another feed or source table fails the task without
retry.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from airflow.sdk import BaseSensorOperator, Context

from lakefeed_airflow.triggers import FeedReadinessTrigger

# The run types that wait for new data. A manual run (the Trigger button, `airflow dags test`) is asked for
# by someone who wants an answer now; a backfill names its range and needs no sensor.
WAITING_RUN_TYPES = frozenset({"scheduled"})


def run_type_of(context: Context) -> str:
    """The run's type as Airflow names it (``scheduled``, ``manual``, ``backfill``, ...)."""
    run_type = getattr(context.get("dag_run"), "run_type", None)
    return str(getattr(run_type, "value", run_type) or "manual")


def _none_if_blank(value: Any) -> Any:
    """A rendered template of an unset value ('' or 'None') means None."""
    return None if value in (None, "", "None") else value


class _PollingSensor(BaseSensorOperator):
    template_fields: Sequence[str] = ("skip_reason", "poke_seconds", "timeout_seconds")

    def __init__(
        self,
        *,
        skip_reason: str = "",
        poke_seconds: str | float = 60.0,
        timeout_seconds: str | float = 3000.0,
        deferrable: bool = True,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.skip_reason = skip_reason
        self.poke_seconds = poke_seconds
        self.timeout_seconds = timeout_seconds
        self.deferrable = deferrable

    def _check(self) -> tuple[bool, dict[str, Any]]:
        """(ready, details): reads the checkpoint and the source; raises a Refusal when they do not match."""
        raise NotImplementedError

    def _trigger(self, deadline: str) -> Any:
        """What a deferred wait polls until ``deadline``."""
        raise NotImplementedError

    def _checked(self) -> tuple[bool, dict[str, Any]]:
        from airflow.sdk.exceptions import AirflowFailException

        from lakefeed.errors import Refusal
        from lakefeed_airflow.wasb_feed import connection_scope

        try:
            with connection_scope(_none_if_blank(getattr(self, "wasb_conn_id", None))):
                ready, details = self._check()
        except Refusal as exc:
            raise AirflowFailException(f"{type(exc).__name__}: {exc}") from exc
        self.log.info("checked: ready=%s %s", ready, details)
        return ready, details

    def poke(self, context: Context) -> bool:
        return bool(self.skip_reason) or self._checked()[0]

    def execute(self, context: Context) -> Any:
        if self.skip_reason:
            self.log.info("%s: nothing to wait for", self.skip_reason)
            return None
        self.poke_interval = float(self.poke_seconds)
        self.timeout = float(self.timeout_seconds)
        ready, details = self._checked()
        if ready:
            return details
        run_type = run_type_of(context)
        if run_type not in WAITING_RUN_TYPES:
            from airflow.sdk.exceptions import AirflowSkipException

            raise AirflowSkipException(
                f"up to date: nothing new to ingest ({json.dumps(details, default=str)}). A {run_type} run "
                f"checks once and does not wait; scheduled runs wait up to {self.timeout:g} s for new data"
            )
        if not self.deferrable:
            return super().execute(context=context)
        deadline = (datetime.now(UTC) + timedelta(seconds=self.timeout)).strftime("%Y-%m-%dT%H:%M:%SZ")
        self.defer(
            trigger=self._trigger(deadline),
            method_name="execute_complete",
            timeout=timedelta(seconds=self.timeout + 300),  # the trigger gives up at its deadline; a backstop
        )

    def execute_complete(self, context: Context, event: dict[str, Any]) -> dict[str, Any]:
        from airflow.sdk.exceptions import AirflowFailException, AirflowSkipException

        status = event.get("status")
        if status == "ready":
            self.log.info("ready: %s", event)
            return event
        if status == "timeout":
            raise AirflowSkipException(
                f"nothing became ready before the sensor's deadline ({event}): nothing to ingest this run"
            )
        if status == "refused":
            raise AirflowFailException(event.get("message"))
        raise RuntimeError(event.get("message") or f"unexpected trigger event {event!r}")


class FeedReadySensor(_PollingSensor):
    """Waits until a feed's source has something past its checkpoints: checks once in the worker (the feed's
    ``FeedHooks.watch``, then its readiness check), then polls the check from the triggerer.

    :param feed: the lakefeed DAG whose feed it waits for (:func:`lakefeed.feeds.spec_of`)
    :param pipeline: the pipeline a run's params name (templated; empty: every pipeline of the feed)

    Reads the feed's configuration Variable when it runs (never while the DAG file is parsed): its
    ``sensor_poke_seconds``, ``sensor_timeout_seconds`` and ``wasb_conn_id``. A checkpoint that does not belong
    to the configured source and targets (checked once, before waiting) fails the task.
    """

    template_fields: Sequence[str] = (*_PollingSensor.template_fields, "pipeline")

    def __init__(self, *, feed: str, pipeline: str = "", **kwargs: Any) -> None:
        kwargs.setdefault("poke_seconds", "")
        kwargs.setdefault("timeout_seconds", "")
        super().__init__(**kwargs)
        self.feed = feed
        self.pipeline = pipeline

    def execute(self, context: Context) -> Any:
        if not self.skip_reason:  # a run that waits for nothing reads nothing
            from lakefeed_airflow.settings import config_of

            self._configured = config = config_of(self._spec())  # read once: the checks below use it
            if _none_if_blank(self.poke_seconds) is None:
                self.poke_seconds = config.sensor_poke_seconds
            if _none_if_blank(self.timeout_seconds) is None:
                self.timeout_seconds = config.sensor_timeout_seconds
            self.wasb_conn_id = config.wasb_conn_id
        return super().execute(context)

    def _spec(self) -> Any:
        from lakefeed.feeds import spec_of

        spec = spec_of(self.feed)
        if spec is None:
            raise ValueError(f"{self.feed} is not a lakefeed DAG")
        return spec

    def _watch(self) -> dict[str, Any]:
        from lakefeed.pipeline import Watching
        from lakefeed_airflow.settings import checkpoint_store
        from lakefeed_airflow.wasb_feed import AIRFLOW_STORAGE

        hooks = self._spec().hooks
        return hooks.watch(
            Watching(
                self._configured,
                lambda pipeline: checkpoint_store(pipeline, hooks.checkpoint_type).load(),
                _none_if_blank(self.pipeline),
                AIRFLOW_STORAGE,
            )
        )

    def _check(self) -> tuple[bool, dict[str, Any]]:
        self._watched = self._watch()
        return FeedReadinessTrigger.check(self._watched, self._spec().hooks.readiness)

    def _trigger(self, deadline: str) -> Any:
        return FeedReadinessTrigger(
            readiness=self._spec().hooks.readiness, **self._watched, deadline=deadline, poke_interval=self.poke_interval
        )
