"""SparkSubmitOperator that hands the feed's storage credentials to the job without exposing them."""

from __future__ import annotations

from typing import Any

from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator


class FeedSparkSubmitOperator(SparkSubmitOperator):
    """Like SparkSubmitOperator; when the blob pipeline reads Azure through a ``wasb`` connection,
    the job gets the credentials in its environment, never on its command line."""

    def execute(self, context: Any):
        from lakefeed_airflow.wasb_feed import process_environment, spark_credential_env
        from lakefeed_airflow.settings import blob_config

        conn_id = blob_config().wasb_conn_id
        if not conn_id:
            return super().execute(context)
        self.log.info("credentials for the feed come from connection %s (environment, not argv)", conn_id)
        with process_environment(spark_credential_env(conn_id)):
            return super().execute(context)
