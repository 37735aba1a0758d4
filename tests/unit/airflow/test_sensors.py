"""Who waits for new data: a scheduled run defers until its deadline; any other run with nothing to do
(the Trigger button, `airflow dags test`) ends at once as up to date; a run that names its own range
(``skip_reason``) never checks. The rule, on a sensor whose source is a stub."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from airflow.exceptions import TaskDeferred
from airflow.sdk.exceptions import AirflowSkipException
from airflow.triggers.base import BaseTrigger

from lakefeed_airflow.sensors import WAITING_RUN_TYPES, _PollingSensor, run_type_of


class _Never(BaseTrigger):
    def serialize(self) -> tuple[str, dict[str, Any]]:
        return ("tests.unit.airflow.test_sensors._Never", {})

    async def run(self):  # pragma: no cover - never run here
        yield None


class StubSensor(_PollingSensor):
    def __init__(self, *, ready: bool, **kwargs: Any) -> None:
        super().__init__(task_id="wait", **kwargs)
        self.ready = ready
        self.checks = 0

    def _check(self) -> tuple[bool, dict[str, Any]]:
        self.checks += 1
        return self.ready, {"newest": 7 if self.ready else 5, "applied": 5}

    def _trigger(self, deadline: str) -> BaseTrigger:
        return _Never()


def context(run_type: str | None) -> dict[str, Any]:
    return {"dag_run": SimpleNamespace(run_type=run_type)} if run_type else {}


def test_a_scheduled_run_with_nothing_ready_defers_until_its_deadline():
    sensor = StubSensor(ready=False, timeout_seconds="3000", poke_seconds="60")
    with pytest.raises(TaskDeferred) as deferred:
        sensor.execute(context("scheduled"))
    assert deferred.value.timeout.total_seconds() == 3000 + 300
    assert sensor.checks == 1


@pytest.mark.parametrize("run_type", ["manual", "asset_triggered", None])
def test_any_other_run_with_nothing_ready_ends_at_once_as_up_to_date(run_type):
    sensor = StubSensor(ready=False, timeout_seconds="3000", poke_seconds="60")
    with pytest.raises(
        AirflowSkipException,
        match=r"^up to date: nothing new to ingest .*\"applied\": 5.* "
        r"run checks once and does not wait; scheduled runs wait up to "
        r"3000 s",
    ):
        sensor.execute(context(run_type))
    assert sensor.checks == 1


@pytest.mark.parametrize("deferrable", [True, False])
def test_the_rule_holds_for_a_sensor_that_pokes_in_the_worker_too(deferrable):
    sensor = StubSensor(ready=False, timeout_seconds="3000", poke_seconds="60", deferrable=deferrable)
    with pytest.raises(AirflowSkipException, match="up to date"):
        sensor.execute(context("manual"))


@pytest.mark.parametrize("run_type", ["scheduled", "manual"])
def test_a_ready_source_passes_whatever_the_run(run_type):
    assert StubSensor(ready=True).execute(context(run_type)) == {"newest": 7, "applied": 5}


def test_a_run_that_names_its_range_does_not_check():
    sensor = StubSensor(ready=False, skip_reason="backfill run")
    assert sensor.execute(context("manual")) is None and sensor.checks == 0


def test_run_types_as_airflow_passes_them():
    from airflow.utils.types import DagRunType

    assert run_type_of(context(DagRunType.SCHEDULED)) == "scheduled" and "scheduled" in WAITING_RUN_TYPES
    assert run_type_of(context(DagRunType.MANUAL)) == "manual"
    assert run_type_of({}) == "manual"
