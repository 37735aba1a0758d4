"""
### CockroachDB changefeeds pulled over SQL → Delta (exactly once)

Each run pulls a bounded core changefeed (`CREATE CHANGEFEED FOR … WITH cursor, end_time, updated, resolved`,
or `EXPERIMENTAL CHANGEFEED FOR` on servers before v25.2) on a dedicated connection from the Airflow
connection `sql_conn_id` (type `postgres`), stages its rows in the cloud storage sink's layout under
`staging_root`, and applies them with the CockroachDB job: the greatest `updated` per key, deletes as
tombstones. The first run takes an initial scan; then each run pulls from its checkpoint to the cluster's
clock less `safety_lag_seconds`.

Configure it in the Variable `lakefeed_crdb_sql_config` (docs/configuration.md); run it by hand with
`airflow dags test cockroach_sql_changefeed_to_delta`.
"""

from lakefeed.crdbsql.spec import SPEC
from lakefeed_airflow.pipeline_dag import feed_dag

dag = feed_dag(SPEC, __doc__)
