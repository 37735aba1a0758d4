"""The SparkSubmitOperator every lakefeed DAG submits its jobs with.

Like the provider's operator, plus what the jobs' contract needs:

- exit code 2 means the job refused its input (bad file, unreadable range,
  unready window) and wrote nothing: the task fails at once with the job's
  reason (``AirflowFailException``), since a retry would read the same input.
  Any other failure is transient and retried as configured;
- ``timeout_minutes`` (templated) becomes the task's ``execution_timeout``
  when it starts, so a hung spark-submit is killed and the pool slot freed;
- ``extra_conf`` (templated; a dict or its JSON) adds ``--conf`` settings;
- ``wasb_conn_id`` (templated): the pipeline's Azure credentials go into the
  environment of the spark-submit process, never its command line (the job
  hands them to adlfs and to hadoop-azure's ABFS); a job that opens Azure
  storage gets hadoop-azure added to its ``packages``; on a worker whose
  ``LAKEFEED_JARS_DIR`` names a folder of jars (air-gapped: Delta, and hadoop-azure
  for Azure), the job gets those jars instead and resolves nothing from Maven Central;
- the job's summary comes back as the task's XCom (a refusal's reason under
  ``refusal``): the operator adds ``--summary-json <location>`` and reads what the
  driver left there. The location is a scratch folder of this task (client deploy
  mode: the driver runs here) or, with ``summary_root`` (templated; the config's
  ``job_summary_root``), a fresh object under that URL, for a driver running on the
  cluster. Either way no other task reads it, so tasks may run on any worker;
- ``lineage``: what the plan declared the job reads and writes (:class:`lakefeed.lineage.JobLineage`), for
  the OpenLineage events of the task (:mod:`lakefeed_airflow.lineage`): the declared datasets when it starts
  or fails, and with its summary's versions, figures and applied range when it completes.
"""

from __future__ import annotations

import json
import re
import shutil
import tempfile
import uuid
from collections.abc import Sequence
from contextlib import nullcontext
from datetime import timedelta
from typing import Any

from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator

from lakefeed.jobs import failure_location, read_document, refusal_location, remove_document
from lakefeed_airflow.runs import REFUSAL_KEY

REFUSED_EXIT_CODE = 2
SUMMARY_ARGUMENT = "--summary-json"


def _unset(value: Any) -> bool:
    return value in (None, "", "None")


def summary_location(root: str, dag_id: str, run_id: str, task_id: str, map_index: int, try_number: int) -> str:
    """A fresh summary location under ``root`` (a folder or URL) for one try of one job task."""

    def safe(name: str) -> str:
        return re.sub(r"[^A-Za-z0-9_.-]", "_", name)

    name = f"{max(map_index, 0)}-try{try_number}-{uuid.uuid4().hex[:8]}.json"
    return "/".join([root.rstrip("/"), safe(dag_id), safe(run_id), safe(task_id), name])


def local_jars() -> str | None:
    """The jars of the folder ``LAKEFEED_JARS_DIR`` names on this worker, comma-separated, or None when it
    names none (:func:`lakefeed.spark.jar_settings`, as the jobs' own sessions read it)."""
    from lakefeed.spark import jar_settings

    return jar_settings().get("spark.jars")


class LakefeedSparkSubmitOperator(SparkSubmitOperator):
    """Submit one lakefeed job (see the module docstring for what it adds to SparkSubmitOperator)."""

    template_fields: Sequence[str] = (
        *SparkSubmitOperator.template_fields,
        "wasb_conn_id",
        "extra_conf",
        "timeout_minutes",
        "summary_root",
    )

    def __init__(
        self,
        *,
        wasb_conn_id: str | None = None,
        extra_conf: str | dict | None = None,
        timeout_minutes: str | float | None = None,
        summary_root: str | None = None,
        lineage: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.wasb_conn_id = wasb_conn_id
        self.extra_conf = extra_conf
        self.timeout_minutes = timeout_minutes
        self.summary_root = summary_root
        self.lineage = lineage
        self._summary: dict[str, Any] | None = None  # the job's, once it finished (its OpenLineage COMPLETE event)

    def pre_execute(self, context: Any) -> None:
        # Runs after templates are rendered and before the task runner reads execution_timeout.
        if self.timeout_minutes not in (None, "", "None"):
            self.execution_timeout = timedelta(minutes=float(self.timeout_minutes))
        extra = (
            json.loads(self.extra_conf)
            if isinstance(self.extra_conf, str) and self.extra_conf.strip()
            else (self.extra_conf or {})
        )
        if not isinstance(extra, dict):
            raise ValueError(f"extra_conf must be a JSON object of Spark settings, got {self.extra_conf!r}")
        from lakefeed.spark import SUBMIT_SETTINGS

        self.conf = {**SUBMIT_SETTINGS, **(self.conf or {}), **{str(k): str(v) for k, v in extra.items()}}
        jars = local_jars()
        if jars is not None:  # an air-gapped worker: the jars of its folder, nothing from Maven Central
            self.jars, self.packages = jars, None
        elif self._reads_azure():
            from lakefeed.spark import hadoop_azure_package

            packages = [p for p in str(self.packages or "").split(",") if p]
            if not any(":hadoop-azure:" in p for p in packages):
                self.packages = ",".join([*packages, hadoop_azure_package()])

    def _reads_azure(self) -> bool:
        """Whether the job opens Azure storage from Spark (a connection to read with, or an Azure URL among
        its arguments): then Spark needs hadoop-azure's filesystem."""
        from lakefeed.azure import is_azure_url

        return not _unset(self.wasb_conn_id) or any(is_azure_url(str(a)) for a in self.application_args or [])

    def execute(self, context: Any) -> dict[str, Any]:  # type: ignore[override]  # the summary is its XCom
        """Submit the job; return its summary (the task's XCom)."""
        from airflow.sdk.exceptions import AirflowFailException

        ti = context["ti"]
        scratch = None
        if _unset(self.summary_root):
            scratch = tempfile.mkdtemp(prefix="lakefeed-job-")
            root = scratch
        else:
            root = str(self.summary_root)
        location = summary_location(root, ti.dag_id, ti.run_id, ti.task_id, ti.map_index, ti.try_number)
        args = list(self.application_args or [])
        if SUMMARY_ARGUMENT in args[:-1]:  # a plan made before the operator chose the location
            del args[args.index(SUMMARY_ARGUMENT) : args.index(SUMMARY_ARGUMENT) + 2]
        self.application_args = [*args, SUMMARY_ARGUMENT, location]
        try:
            try:
                self._submit(context)
            except Exception as exc:
                code = getattr(getattr(self._hook, "_submit_sp", None), "returncode", None)
                if code == REFUSED_EXIT_CODE:
                    reason = self._read(refusal_location(location))
                    text = (reason or {}).get("error", "see the job's log above")
                    ti.xcom_push(key=REFUSAL_KEY, value=text)
                    raise AirflowFailException(
                        f"the job refused its input (exit code 2), nothing was written; not retried: {text}"
                    ) from exc
                failure = self._read(failure_location(location))
                if failure:
                    raise RuntimeError(
                        f"the Spark job failed (exit code {code}), retried as configured: {failure.get('error')}"
                    ) from exc
                raise
            summary = self._read(location)
            if summary is None:  # retried: the job may have died after its commits, before its summary
                raise RuntimeError(f"spark-submit exited 0 but the job left no summary at {location}")
            self._summary = summary
            return summary
        finally:
            if scratch is not None:
                shutil.rmtree(scratch, ignore_errors=True)
            else:
                for leftover in (location, refusal_location(location), failure_location(location)):
                    with self._credentials():
                        remove_document(leftover)

    def get_openlineage_facets_on_start(self) -> Any:
        """The datasets the plan declared for this job (None: a task made without them)."""
        if not self.lineage:
            return None
        from lakefeed.lineage import JobLineage
        from lakefeed_airflow.lineage import declared_lineage

        return declared_lineage(JobLineage.from_dict(self.lineage))

    def get_openlineage_facets_on_complete(self, task_instance: Any) -> Any:
        """The declared datasets with what the job's summary reports, and the ``lakefeed_job`` run facet."""
        if not self.lineage or self._summary is None:
            return self.get_openlineage_facets_on_start()
        from lakefeed.lineage import JobLineage
        from lakefeed_airflow.lineage import completed_lineage

        try:
            return completed_lineage(JobLineage.from_dict(self.lineage), self._summary)
        except Exception:  # a summary lineage cannot read: the declared datasets all the same
            self.log.exception("the job's summary gives no lineage; its declared datasets are sent")
            return self.get_openlineage_facets_on_start()

    def get_openlineage_facets_on_failure(self, task_instance: Any) -> Any:
        """The declared datasets (the provider adds the error)."""
        return self.get_openlineage_facets_on_start()

    def _credentials(self):
        """The connection's credential for the store of a summary under an Azure URL (given to adlfs
        explicitly; a URL that no connection covers is refused, never read with the machine's identity)."""
        if _unset(self.wasb_conn_id) or _unset(self.summary_root):
            return nullcontext()
        from lakefeed_airflow.wasb_feed import connection_scope

        return connection_scope(self.wasb_conn_id)

    def _read(self, location: str) -> dict | None:
        with self._credentials():
            return read_document(location)

    def _submit(self, context: Any) -> None:
        if _unset(self.wasb_conn_id):
            super().execute(context)
            return
        from lakefeed_airflow.wasb_feed import connection_credentials, process_environment

        self.log.info("credentials for the feed come from connection %s (environment, not argv)", self.wasb_conn_id)
        with process_environment(connection_credentials(str(self.wasb_conn_id))):
            super().execute(context)
