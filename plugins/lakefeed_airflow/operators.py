"""The SparkSubmitOperator every lakefeed DAG submits its jobs with.

Like the provider's operator, plus what the jobs' contract needs:

- exit code 2 means the job refused its input (bad file, unreadable range,
  unready window) and wrote nothing: the task fails at once with the job's
  reason (``AirflowFailException``), since a retry would read the same input.
  Any other failure is transient and retried as configured;
- ``timeout_minutes`` (templated) becomes the task's ``execution_timeout``
  when it starts, so a hung spark-submit is killed and the pool slot freed;
- ``extra_conf`` (templated; a dict or its JSON) adds ``--conf`` settings;
- ``wasb_conn_id`` (templated): the feed's Azure credentials go into the
  environment of the spark-submit process, never its command line.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator

from lakefeed.jobs import refusal_path

REFUSED_EXIT_CODE = 2


class LakefeedSparkSubmitOperator(SparkSubmitOperator):
    """Submit one lakefeed job (see the module docstring for what it adds to SparkSubmitOperator)."""

    template_fields: Sequence[str] = (*SparkSubmitOperator.template_fields, "wasb_conn_id", "extra_conf",
                                      "timeout_minutes")

    def __init__(self, *, wasb_conn_id: str | None = None, extra_conf: str | dict | None = None,
                 timeout_minutes: str | float | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.wasb_conn_id = wasb_conn_id
        self.extra_conf = extra_conf
        self.timeout_minutes = timeout_minutes

    def pre_execute(self, context: Any) -> None:
        # Runs after templates are rendered and before the task runner reads execution_timeout.
        if self.timeout_minutes not in (None, "", "None"):
            self.execution_timeout = timedelta(minutes=float(self.timeout_minutes))
        extra = json.loads(self.extra_conf) if isinstance(self.extra_conf, str) and self.extra_conf.strip() \
            else (self.extra_conf or {})
        if not isinstance(extra, dict):
            raise ValueError(f"extra_conf must be a JSON object of Spark settings, got {self.extra_conf!r}")
        self.conf = {**(self.conf or {}), **{str(k): str(v) for k, v in extra.items()}}

    def execute(self, context: Any):
        from airflow.sdk.exceptions import AirflowFailException

        try:
            return self._submit(context)
        except Exception as exc:
            code = getattr(getattr(self._hook, "_submit_sp", None), "returncode", None)
            if code == REFUSED_EXIT_CODE:
                raise AirflowFailException(f"the job refused its input (exit code 2), nothing was written; "
                                           f"not retried: {self._refusal_reason()}") from exc
            raise

    def _submit(self, context: Any):
        if not self.wasb_conn_id or self.wasb_conn_id == "None":
            return super().execute(context)
        from lakefeed_airflow.wasb_feed import process_environment, spark_credential_env

        self.log.info("credentials for the feed come from connection %s (environment, not argv)", self.wasb_conn_id)
        with process_environment(spark_credential_env(self.wasb_conn_id)):
            return super().execute(context)

    def _refusal_reason(self) -> str:
        args = list(self.application_args or [])
        if "--summary-json" in args[:-1]:
            path = refusal_path(args[args.index("--summary-json") + 1])
            if path.exists():
                return json.loads(path.read_text()).get("error", "see the log above")
        return "see the job's log above"
