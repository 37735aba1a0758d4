"""What every lakefeed DAG run shares: which kind of run it is, its folder of job summaries, and the
check that a summary really is the one of the job it is credited to.

Each spark-submit job writes its summary after its MERGEs committed to
``<run_dir>/<dag id>/<run id>/<plan id>/<job>.json`` (or, when it refused its
input, ``<job>.refused.json``). The plan id is new for every plan, so a summary
left by an earlier plan of the same run, or by another DAG sharing ``run_dir``,
is never credited.
"""

from __future__ import annotations

import json
import logging
import re
import uuid
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Callable

from lakefeed.errors import ConfigError
from lakefeed.jobs import refusal_path
from lakefeed.progress import BACKFILL, RESET, SCHEDULED

log = logging.getLogger(__name__)

REFUSAL_KEY = "refusal"  # XCom of a plan task that refused its run: the reason (shown by the monitor)
AIRFLOW_BACKFILL = "backfill"  # DagRunType of runs made by Airflow's Backfill (UI or `airflow backfill create`)


@dataclass(frozen=True)
class RunContext:
    """The DAG run a task belongs to, as the task logic needs it."""

    dag_id: str
    run_id: str
    run_type: str = "manual"
    interval_start: datetime | None = None
    interval_end: datetime | None = None

    @property
    def is_airflow_backfill(self) -> bool:
        return self.run_type == AIRFLOW_BACKFILL

    @classmethod
    def from_airflow(cls, context: dict[str, Any]) -> "RunContext":
        dag_run = context["dag_run"]
        run_type = getattr(dag_run.run_type, "value", dag_run.run_type)
        return cls(dag_id=dag_run.dag_id, run_id=dag_run.run_id, run_type=str(run_type),
                   interval_start=context.get("data_interval_start"), interval_end=context.get("data_interval_end"))


def run_kind(run: RunContext, params_name_a_range: bool, reset: bool) -> str:
    """How this run may move the checkpoint (:mod:`lakefeed.progress`): Airflow's Backfill runs and
    runs whose params name a range are backfills; ``reset`` asks for a re-initialisation."""
    if run.is_airflow_backfill:
        if not (run.interval_start and run.interval_end and run.interval_end > run.interval_start):
            raise ConfigError(
                f"this Backfill run has no data interval ({run.interval_start} .. {run.interval_end}): its DAG must "
                "run on a data-interval timetable (CronDataIntervalTimetable) for a Backfill to name its hours")
        if params_name_a_range or reset:
            raise ConfigError(
                "this is one of Airflow's Backfill runs: it re-processes exactly its data interval "
                f"({run.interval_start} .. {run.interval_end}); leave the range and reset params empty "
                "(use them with a Single Run instead)")
        return BACKFILL
    if params_name_a_range and reset:
        raise ConfigError("a run either re-processes a range or resets the checkpoint, not both")
    if params_name_a_range:
        return BACKFILL
    return RESET if reset else SCHEDULED


def plan_folder(run_dir: str, run: RunContext) -> Path:
    """A new, empty folder for the summaries of this plan's jobs."""
    folder = Path(run_dir) / _safe(run.dag_id) / _safe(run.run_id) / uuid.uuid4().hex[:12]
    folder.mkdir(parents=True, exist_ok=False)
    return folder


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", name)


def summary_path(folder: str | Path, index: int) -> str:
    return str(Path(folder) / f"{index}.json")


def finished_summaries(folder: str | Path, jobs: list[dict[str, Any]],
                       belongs: Callable[[dict[str, Any], dict[str, Any]], bool]) -> dict[int, dict]:
    """Summaries of the jobs that finished, by job index; a summary that does not describe the job it
    sits under (``belongs(summary, job)`` is false) is not credited."""
    found = {}
    for index, job in enumerate(jobs):
        path = Path(summary_path(folder, index))
        if not path.exists():
            continue
        summary = json.loads(path.read_text())
        if belongs(summary, job):
            found[index] = summary
        else:
            log.error("%s does not describe job %d (%s); not credited", path, index, json.dumps(job))
    return found


def refusals(folder: str | Path, count: int) -> dict[int, str]:
    """The reasons jobs gave for refusing their input, by job index."""
    found = {}
    for index in range(count):
        path = refusal_path(summary_path(folder, index))
        if path.exists():
            found[index] = json.loads(path.read_text()).get("error", "refused")
    return found


class BatchesFailed(RuntimeError):
    """Some of a run's jobs failed; ``report`` is the run summary all the same."""

    def __init__(self, message: str, report: dict[str, Any]):
        super().__init__(message)
        self.report = report


def fail_if_any_failed(failed: list, total: int, position: str | None, report: dict[str, Any]) -> None:
    if failed:
        raise BatchesFailed(
            f"{len(failed)} of {total} batch(es) failed (first: {failed[0]}); checkpoint is at {position}: "
            "the next run resumes from there", report)

