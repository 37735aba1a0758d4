"""CockroachDB changefeeds pulled over SQL: each run's bounded core changefeed, staged in the sink's layout
and applied by the CockroachDB job (:mod:`lakefeed.crdb`), into Delta."""

KEY = "cockroach_sql"  # the feed's kind: its monitor card and lineage jobs
DAG_ID = "cockroach_sql_changefeed_to_delta"
