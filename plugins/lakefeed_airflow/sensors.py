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
    ResolvedTimestampTrigger,
    feed_readiness,
    resolved_readiness,
    sources_behind,
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

    def _check(self) -> tuple[bool, dict[str, Any]]:
        """(ready, details): reads the checkpoint and the source; raises a Refusal when they do not match."""
        raise NotImplementedError

    def _trigger(self, deadline: str):
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

    def _trigger_arguments(self) -> dict[str, Any]:
        from lakefeed.blob.checkpoint import BlobCheckpoint
        from lakefeed.blob.pipeline import RESET_REMEDY
        from lakefeed.targets import verify_targets
        from lakefeed.times import format_time
        from lakefeed_airflow.settings import VariableCell

        cell = VariableCell(self.checkpoint_variable)
        checkpoint = BlobCheckpoint.from_json(cell.get(), f"Variable {cell.name}")
        targets = json.loads(self.targets) if isinstance(self.targets, str) else self.targets
        verify_targets(checkpoint.targets, targets, f"Variable {cell.name}", RESET_REMEDY)
        return {
            "feed_root": self.feed_root,
            "wasb_conn_id": _none_if_blank(self.wasb_conn_id),
            "watermark": format_time(checkpoint.watermark) if checkpoint.watermark else None,
            "last_consumable_seen": format_time(checkpoint.last_consumable) if checkpoint.last_consumable else None,
            "start_from": _none_if_blank(self.start_from),
            "feed_identity": checkpoint.feed,
            "checkpoint_variable": self.checkpoint_variable,
        }

    def _check(self) -> tuple[bool, dict[str, Any]]:
        self._arguments = self._trigger_arguments()
        return feed_readiness(**self._arguments)

    def _trigger(self, deadline: str) -> ChangeFeedReadyTrigger:
        return ChangeFeedReadyTrigger(**self._arguments, deadline=deadline, poke_interval=self.poke_interval)


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

    def _trigger_sources(self) -> list[dict[str, Any]]:
        from lakefeed.cdf.checkpoint import CdfCheckpoint
        from lakefeed.cdf.pipeline import refresh_remedy, verify_definition_of
        from lakefeed.targets import verify_targets
        from lakefeed_airflow.settings import VariableCell
        from lakefeed_airflow.wasb_feed import connection_scope

        watched = []
        for source in json.loads(self.sources) if isinstance(self.sources, str) else self.sources:
            cell = VariableCell(source["checkpoint_variable"])
            checkpoint = CdfCheckpoint.from_json(cell.get(), f"Variable {cell.name}")
            with connection_scope(source.get("wasb_conn_id")):
                verify_targets(
                    checkpoint.targets,
                    {"target": source["target_table"]},
                    f"Variable {cell.name}",
                    refresh_remedy(source["name"]),
                )
            if "keys" in source:
                verify_definition_of(
                    source["name"], checkpoint, source["keys"], source.get("columns"), f"Variable {cell.name}"
                )
            watched.append(
                {key: source[key] for key in ("name", "source_table", "checkpoint_variable")}
                | {
                    "applied_version": checkpoint.applied_version,
                    "source_table_id": checkpoint.source_id,
                    "wasb_conn_id": source.get("wasb_conn_id"),
                }
            )
        return watched

    def _check(self) -> tuple[bool, dict[str, Any]]:
        self._sources = self._trigger_sources()
        behind = sources_behind(self._sources)
        return bool(behind), {"behind": behind}

    def _trigger(self, deadline: str) -> DeltaVersionTrigger:
        return DeltaVersionTrigger(sources=self._sources, deadline=deadline, poke_interval=self.poke_interval)


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

    def _check(self) -> tuple[bool, dict[str, Any]]:
        from lakefeed.checkpoint import verify_definition
        from lakefeed.crdb.checkpoint import CrdbCheckpoint
        from lakefeed.crdb.pipeline import RESET_REMEDY, recorded_root, root_of
        from lakefeed.targets import verify_targets
        from lakefeed_airflow.settings import VariableCell

        cell = VariableCell(self.checkpoint_variable)
        checkpoint = CrdbCheckpoint.from_json(cell.get(), f"Variable {cell.name}")
        target_root = _none_if_blank(self.target_root)
        if target_root:
            verify_definition(
                "target_root",
                recorded_root(checkpoint),
                root_of(target_root),
                f"Variable {cell.name}",
                RESET_REMEDY,
            )
        verify_targets(
            checkpoint.targets,
            {f"topic {t.rsplit('/', 1)[-1]}": t for t in checkpoint.targets},
            f"Variable {cell.name}",
            RESET_REMEDY,
        )
        self._arguments = {
            "sink_root": self.sink_root,
            "wasb_conn_id": _none_if_blank(self.wasb_conn_id),
            "resolved": checkpoint.resolved,
            "sink_identity": checkpoint.sink,
            "checkpoint_variable": self.checkpoint_variable,
        }
        return resolved_readiness(**self._arguments)

    def _trigger(self, deadline: str) -> ResolvedTimestampTrigger:
        return ResolvedTimestampTrigger(**self._arguments, deadline=deadline, poke_interval=self.poke_interval)
