"""The SQL-pulled CockroachDB feed's configuration (the ``lakefeed_crdb_sql_config`` Variable)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from lakefeed.config import DATA_DIR, check_retention, check_spark_settings, from_mapping, json_document
from lakefeed.crdb.config import CrdbConfig
from lakefeed.crdbsql.pull import STATEMENT_FORMS, check_duration, check_table_name, topic_of
from lakefeed.errors import ConfigError

STAGING_ROOT = str(DATA_DIR / "crdb_sql_staging")


@dataclass(frozen=True)
class CrdbSqlConfig(CrdbConfig):
    """Settings of the SQL-pulled CockroachDB DAG. The CockroachDB feed's keys keep their meaning (target
    root, quarantine, tombstones, Spark), and the pulled ranges are staged under ``staging_root`` in the
    sink's layout, which the job reads as it reads a sink (``sink_root`` is that same folder)."""

    sql_conn_id: str = "lakefeed_cockroach"  # an Airflow postgres connection to the cluster
    tables: list[str] = field(default_factory=lambda: ["customers", "orders"])  # the changefeed's targets
    staging_root: str = STAGING_ROOT  # where pulled ranges are staged (folder or URL; wasb_conn_id for Azure)
    sink_root: str = STAGING_ROOT
    target_root: str = str(DATA_DIR / "lake" / "crdb_sql")
    checkpoint_variable: str = "lakefeed_crdb_sql_checkpoint"
    safety_lag_seconds: float = 30.0  # a range ends this long before the cluster's clock
    max_span_hours: float = 24.0  # a run pulls at most this long past its checkpoint
    statement_form: str = "auto"  # auto (by the server's version) | experimental | create
    min_checkpoint_frequency: str | None = "5s"  # how soon a bounded changefeed sees its end (CockroachDB: 30s)
    resolved_per_batch: int = 1  # one pulled range per job
    late_file_lookback_hours: float = 0.0  # staged ranges are whole when their RESOLVED file is written

    @classmethod
    def from_json(cls, text: str | None, where: str) -> CrdbSqlConfig:
        mapping = json_document(text, where) or {}
        staging = mapping.get("staging_root", STAGING_ROOT)
        if "sink_root" in mapping and mapping["sink_root"] != staging:
            raise ConfigError(
                f"{where}: this feed pulls its changes over SQL and stages them under staging_root; sink_root "
                f"is that same folder (leave it out)"
            )
        config = from_mapping(cls, {**mapping, "staging_root": staging, "sink_root": staging}, where)
        config = replace(config, target_root=config.target_root.rstrip("/") or "/")
        if not config.tables or not all(isinstance(t, str) for t in config.tables):
            raise ConfigError(f"{where}: tables must list the tables the changefeed watches")
        for table in config.tables:
            check_table_name(table, where)
        named = [topic_of(table) for table in config.tables]
        if len(set(named)) < len(named):
            raise ConfigError(
                f"{where}: tables {', '.join(config.tables)} name one table twice (a changefeed's rows carry the "
                f"table's own name, so two schemas' tables of one name cannot share a target root)"
            )
        if config.min_checkpoint_frequency is not None:
            check_duration(config.min_checkpoint_frequency, f"{where}: min_checkpoint_frequency")
        if config.statement_form not in STATEMENT_FORMS:
            raise ConfigError(f"{where}: statement_form must be one of {', '.join(STATEMENT_FORMS)}")
        if config.safety_lag_seconds < 0 or config.max_span_hours <= 0:
            raise ConfigError(f"{where}: safety_lag_seconds must be >= 0 and max_span_hours > 0")
        if config.parquet_keys is not None:
            raise ConfigError(f"{where}: parquet_keys is for parquet sink files; a pulled changefeed is JSON")
        if config.resolved_per_batch < 1 or config.max_batches_per_run < 1:
            raise ConfigError(f"{where}: resolved_per_batch and max_batches_per_run must be at least 1")
        check_retention(config.tombstone_retention_hours, where)
        check_spark_settings(config.spark_conf, config.spark_job_timeout_minutes, where)
        return config
