"""The CockroachDB changefeed's configuration (the ``lakefeed_crdb_config`` Variable)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from lakefeed.config import DATA_DIR, Carried, check_retention, check_spark_settings, from_mapping, json_document
from lakefeed.errors import ConfigError


@dataclass(frozen=True)
class CrdbConfig(Carried):
    """Settings of the CockroachDB changefeed DAG (the ``lakefeed_crdb_config`` Variable)."""

    sink_root: str = str(DATA_DIR / "crdb_sink")  # the changefeed's sink path (folder or URL)
    target_root: str = str(DATA_DIR / "lake" / "crdb")  # one Delta table per topic under it
    job_summary_root: str | None = None
    checkpoint_variable: str = "lakefeed_crdb_checkpoint"
    wasb_conn_id: str | None = None  # read an azure:// sink through this connection
    parquet_keys: dict[str, list[str]] | None = None  # format=parquet: {"topic": ["pk col", …]}
    quarantine_table: str | None = None  # a Delta table for lines that are not messages (else: refused)
    tombstone_retention_hours: float | None = None  # remove older tombstones (lakefeed.tombstones); None: keep all
    resolved_per_batch: int = 120  # RESOLVED files per spark-submit
    max_batches_per_run: int = 4
    late_file_lookback_hours: float = 24.0
    sensor_poke_seconds: float = 60.0
    sensor_timeout_seconds: float = 3000.0
    spark_conf: dict[str, Any] | None = None
    spark_job_timeout_minutes: float = 180.0

    def topic_table(self, topic: str) -> str:
        """The Delta table of ``topic``: ``<target_root>/<topic>``, as checkpoints and ledgers name it."""
        return f"{self.target_root.rstrip('/')}/{topic}"

    @classmethod
    def from_json(cls, text: str | None, where: str) -> CrdbConfig:
        config = from_mapping(cls, json_document(text, where), where)
        config = replace(config, target_root=config.target_root.rstrip("/") or "/")  # one spelling from here on
        if config.resolved_per_batch < 1 or config.max_batches_per_run < 1:
            raise ConfigError(f"{where}: resolved_per_batch and max_batches_per_run must be at least 1")
        if config.parquet_keys is not None and not all(
            isinstance(v, list) and v and all(isinstance(c, str) for c in v) for v in config.parquet_keys.values()
        ):
            raise ConfigError(f"{where}: parquet_keys must map each topic to its primary key columns")
        check_retention(config.tombstone_retention_hours, where)
        check_spark_settings(config.spark_conf, config.spark_job_timeout_minutes, where)
        return config
