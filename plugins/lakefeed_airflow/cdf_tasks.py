"""The work behind the Delta CDF DAG's tasks: plan version ranges, spark-submit arguments, checkpoint commit."""

from __future__ import annotations

import json
import logging
from typing import Any

from lakefeed.cdf.log import DeltaLog, cdf_enabled
from lakefeed.cdf.schedule import VersionRange, advance_applied, pending_ranges, split_range
from lakefeed.config import PROJECT_ROOT, CdfConfig, CdfPipeline
from lakefeed.errors import FeedConfigError
from lakefeed.storage import Store
from lakefeed_airflow.runs import fail_if_any_failed, finished_summaries, fresh_run_folder, summary_path

log = logging.getLogger(__name__)

JOB_SCRIPT = str(PROJECT_ROOT / "spark_jobs" / "delta_cdf_job.py")
CHANGES, FULL_REFRESH = "changes", "full-refresh"
SUMMED = ("rowsRead", "keysChanged", "inserted", "updated", "deleted", "unchanged")


def _first_run(pipeline: CdfPipeline, log_: DeltaLog, latest: int) -> list[dict[str, Any]]:
    """With no checkpoint: the change feed from version 0 when it was on from the start, else a snapshot."""
    versions = log_.commit_versions()
    if versions and versions[0] == 0 and cdf_enabled(log_.table_state(0)[0]):
        return [{"mode": CHANGES, **r.to_dict()}
                for r in pending_ranges(None, latest, pipeline.versions_per_job, pipeline.max_versions_per_run)]
    return [{"mode": FULL_REFRESH, "version": latest}]


def plan(config: CdfConfig, applied: dict[str, int | None], params: dict[str, Any], run_id: str) -> dict[str, Any]:
    """Jobs for this run: per pipeline, ranges after its checkpoint (or exactly the backfill params)."""
    jobs: list[dict[str, Any]] = []
    latest_by_name: dict[str, int | None] = {}
    backfill = params.get("full_refresh") or params.get("starting_version") is not None \
        or params.get("ending_version") is not None
    if backfill:
        name = params.get("pipeline") or (config.pipelines[0].name if len(config.pipelines) == 1 else None)
        if name is None:
            raise FeedConfigError("a backfill needs the param pipeline (several pipelines are configured)")
        pipeline = config.pipeline(name)
        latest = DeltaLog(Store(pipeline.source_table)).latest_version()
        latest_by_name[name] = latest
        if params.get("full_refresh"):
            jobs.append({"pipeline": name, "mode": FULL_REFRESH, "version": params.get("ending_version", latest)})
        else:
            start, end = params.get("starting_version"), params.get("ending_version")
            if start is None or end is None:
                raise FeedConfigError("a version backfill needs both starting_version and ending_version")
            if latest is None or end > latest:
                raise FeedConfigError(f"ending_version {end} is beyond the latest version {latest} of "
                                      f"{pipeline.source_table}")
            jobs += [{"pipeline": name, "mode": CHANGES, **r.to_dict()}
                     for r in split_range(start, end, pipeline.versions_per_job)]
    else:
        for pipeline in config.pipelines:
            delta_log = DeltaLog(Store(pipeline.source_table))
            latest = delta_log.latest_version()
            latest_by_name[pipeline.name] = latest
            if latest is None:
                log.warning("pipeline %s: %s is not a Delta table yet", pipeline.name, pipeline.source_table)
                continue
            done = applied.get(pipeline.name)
            planned = _first_run(pipeline, delta_log, latest) if done is None else [
                {"mode": CHANGES, **r.to_dict()}
                for r in pending_ranges(done, latest, pipeline.versions_per_job, pipeline.max_versions_per_run)]
            jobs += [{"pipeline": pipeline.name, **job} for job in planned]
    folder = fresh_run_folder(config.run_dir, run_id)
    result = {"mode": "backfill" if backfill else "scheduled", "jobs": jobs, "latest": latest_by_name,
              "applied": applied, "runFolder": str(folder)}
    log.info("plan: %s", json.dumps(result))
    return result


def job_arguments(config: CdfConfig, planned: dict[str, Any]) -> list[list[str]]:
    """``application_args`` of one spark-submit per job (the job's command-line contract)."""
    arguments = []
    for index, job in enumerate(planned["jobs"]):
        pipeline = config.pipeline(job["pipeline"])
        args = ["--source-table", pipeline.source_table, "--target-table", pipeline.target_table,
                "--keys", ",".join(pipeline.keys)]
        if pipeline.columns:
            args += ["--columns", ",".join(pipeline.columns)]
        if job["mode"] == FULL_REFRESH:
            args += ["--full-refresh"] + (["--version", str(job["version"])] if job.get("version") is not None else [])
        else:
            args += ["--starting-version", str(job["start"]), "--ending-version", str(job["end"])]
        arguments.append(args + ["--summary-json", summary_path(planned["runFolder"], index)])
    return arguments


def commit(config: CdfConfig, stores: dict[str, Any], planned: dict[str, Any], run_id: str) -> dict[str, Any]:
    """Per pipeline: advance its checkpoint over the finished prefix of its ranges; report; fail if any failed."""
    jobs = planned["jobs"]
    summaries = finished_summaries(planned["runFolder"], len(jobs))
    report: dict[str, Any] = {"mode": planned["mode"], "pipelines": {}}
    failed = [job for i, job in enumerate(jobs) if i not in summaries]
    for pipeline in config.pipelines:
        mine = [(i, job) for i, job in enumerate(jobs) if job["pipeline"] == pipeline.name]
        if not mine:
            continue
        store = stores[pipeline.name]
        checkpoint = store.load()
        applied = checkpoint.applied_version
        refreshed = [summaries[i]["endingVersion"] for i, job in mine if job["mode"] == FULL_REFRESH and i in summaries]
        if refreshed:
            applied = max(refreshed[-1], applied) if applied is not None else refreshed[-1]
        ranges = [(i, VersionRange(job["start"], job["end"])) for i, job in mine if job["mode"] == CHANGES]
        applied = advance_applied(applied, [r for _, r in ranges],
                                  {n for n, (i, _) in enumerate(ranges) if i in summaries})
        advanced = checkpoint.advanced(applied, run_id)
        if advanced != checkpoint:
            store.save(advanced)
        latest = planned["latest"].get(pipeline.name)
        done = [summaries[i] for i, _ in mine if i in summaries]
        report["pipelines"][pipeline.name] = {
            "jobs": len(mine),
            "jobsFailed": [job for i, job in mine if i not in summaries],
            "versions": [[job.get("start", job.get("version")), job.get("end", job.get("version"))] for _, job in mine],
            **{key: sum(s.get(key, 0) for s in done) for key in SUMMED},
            "appliedBefore": checkpoint.applied_version,
            "appliedVersion": advanced.applied_version,
            "latestVersion": latest,
            "lagVersions": (latest - advanced.applied_version) if latest is not None and
                           advanced.applied_version is not None else None,
            "sparkSeconds": round(sum(sum(s.get("seconds", {}).values()) for s in done), 3),
        }
    log.info("run summary: %s", json.dumps(report, indent=2))
    fail_if_any_failed(failed, len(jobs), json.dumps({n: r["appliedVersion"] for n, r in report["pipelines"].items()}))
    return report
