"""JVM-free, deferrable sensors, shaped like the Azure provider's WasbBlobSensor: every input is a
keyword-only, templated constructor argument (the DAGs render them from the config Variables), and
each sensor reads one thing besides its source, the checkpoint it compares with.

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

from lakefeed_airflow.triggers import (
    ChangeFeedReadyTrigger,
    DeltaVersionTrigger,
    FeedReadinessTrigger,
    ResolvedTimestampTrigger,
)

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

    trigger_class: type[FeedReadinessTrigger]  # what a deferred wait polls, and what the sensor checks first

    def _watch(self) -> dict[str, Any]:
        """What the trigger polls, from the checkpoint (the feed's ``watch``); raises a Refusal when the
        checkpoint does not match the configuration."""
        raise NotImplementedError

    def _check(self) -> tuple[bool, dict[str, Any]]:
        """(ready, details): reads the checkpoint and the source; raises a Refusal when they do not match."""
        self._watched = self._watch()
        return self.trigger_class.check(self._watched)

    def _trigger(self, deadline: str) -> Any:
        return self.trigger_class(**self._watched, deadline=deadline, poke_interval=self.poke_interval)

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
        self.poke_interval = float(self.poke_seconds)
        self.timeout = float(self.timeout_seconds)
        if self.skip_reason:
            self.log.info("%s: nothing to wait for", self.skip_reason)
            return None
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


class ChangeFeedReadySensor(_PollingSensor):
    """Waits until a blob change feed window past the checkpoint is ready (reads ``meta/Segments.json``).

    :param feed_root: the ``$blobchangefeed`` container (folder or URL)
    :param checkpoint_variable: the Variable holding the pipeline's checkpoint
    :param wasb_conn_id: read the feed through this Azure connection (empty: fsspec)
    :param start_from: ISO time before which windows are ignored on a first run (empty: none)
    :param targets: JSON object ``{role: Delta table}`` of the tables the checkpoint vouches for

    A ``lastConsumable`` that moved backwards, a checkpoint made on another feed, or a target dropped,
    recreated or restored behind the checkpoint (checked once, before waiting) fails the task.
    """

    template_fields: Sequence[str] = (
        *_PollingSensor.template_fields,
        "feed_root",
        "checkpoint_variable",
        "wasb_conn_id",
        "start_from",
        "targets",
    )

    def __init__(
        self,
        *,
        feed_root: str,
        checkpoint_variable: str,
        wasb_conn_id: str | None = None,
        start_from: str | None = None,
        targets: str | dict[str, str] = "{}",
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.feed_root = feed_root
        self.checkpoint_variable = checkpoint_variable
        self.wasb_conn_id = wasb_conn_id
        self.start_from = start_from
        self.targets = targets

    trigger_class = ChangeFeedReadyTrigger

    def _watch(self) -> dict[str, Any]:
        from lakefeed.blob.checkpoint import BlobCheckpoint
        from lakefeed.blob.readiness import watch
        from lakefeed_airflow.settings import VariableCell

        cell = VariableCell(self.checkpoint_variable)
        return watch(
            BlobCheckpoint.from_json(cell.get(), f"Variable {cell.name}"),
            json.loads(self.targets) if isinstance(self.targets, str) else self.targets,
            feed_root=self.feed_root,
            wasb_conn_id=_none_if_blank(self.wasb_conn_id),
            start_from=_none_if_blank(self.start_from),
            checkpoint_variable=self.checkpoint_variable,
        )


class DeltaVersionSensor(_PollingSensor):
    """Waits until the source table of a CDF pipeline has versions past its checkpoint (lists
    ``_delta_log``; never a JVM).

    :param sources: JSON list of ``{"name", "source_table", "target_table", "checkpoint_variable", "keys",
        "columns"}``, one per pipeline

    A source that does not exist or is not the table its checkpoint was made on (dropped and recreated), a
    target dropped, recreated or restored behind the checkpoint, or keys or columns other than the
    checkpoint's (checked once, before waiting), fails the task.
    """

    template_fields: Sequence[str] = (*_PollingSensor.template_fields, "sources")

    def __init__(self, *, sources: str | list[dict[str, Any]], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.sources = sources

    trigger_class = DeltaVersionTrigger

    def _watch(self) -> dict[str, Any]:
        from lakefeed.cdf.checkpoint import CdfCheckpoint
        from lakefeed.cdf.readiness import watch
        from lakefeed_airflow.settings import VariableCell
        from lakefeed_airflow.wasb_feed import AIRFLOW_STORAGE

        watched = []
        for source in json.loads(self.sources) if isinstance(self.sources, str) else self.sources:
            cell = VariableCell(source["checkpoint_variable"])
            watched.append(watch(CdfCheckpoint.from_json(cell.get(), f"Variable {cell.name}"), source, AIRFLOW_STORAGE))
        return {"sources": watched}


class ResolvedTimestampSensor(_PollingSensor):
    """Waits until a CockroachDB changefeed's sink has a RESOLVED file newer than the checkpoint (lists the
    sink from the checkpoint's partition on; never a JVM).

    :param sink_root: the changefeed's sink path (folder or URL)
    :param checkpoint_variable: the Variable holding the pipeline's checkpoint
    :param wasb_conn_id: read an Azure sink through this connection (empty: fsspec)
    :param target_root: the folder of the topic tables (empty: not checked)

    A checkpoint made on another sink or with another target root, or a topic table dropped, recreated
    or restored behind it (checked once, before waiting), fails the task.
    """

    template_fields: Sequence[str] = (
        *_PollingSensor.template_fields,
        "sink_root",
        "checkpoint_variable",
        "wasb_conn_id",
        "target_root",
    )

    def __init__(
        self,
        *,
        sink_root: str,
        checkpoint_variable: str,
        wasb_conn_id: str | None = None,
        target_root: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.sink_root = sink_root
        self.checkpoint_variable = checkpoint_variable
        self.wasb_conn_id = wasb_conn_id
        self.target_root = target_root

    trigger_class = ResolvedTimestampTrigger

    def _watch(self) -> dict[str, Any]:
        from lakefeed.crdb.checkpoint import CrdbCheckpoint
        from lakefeed.crdb.readiness import watch
        from lakefeed_airflow.settings import VariableCell

        cell = VariableCell(self.checkpoint_variable)
        return watch(
            CrdbCheckpoint.from_json(cell.get(), f"Variable {cell.name}"),
            sink_root=self.sink_root,
            wasb_conn_id=_none_if_blank(self.wasb_conn_id),
            target_root=_none_if_blank(self.target_root),
            checkpoint_variable=self.checkpoint_variable,
        )
