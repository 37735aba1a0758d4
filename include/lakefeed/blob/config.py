"""The blob change feed's configuration (the ``lakefeed_blob_config`` Variable)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from lakefeed.config import DATA_DIR, Carried, check_spark_settings, from_mapping, json_document
from lakefeed.errors import ConfigError

# How the blob job decodes chunk files (its --decoder): "auto" reads each file column by column where the
# columnar reader represents it exactly, "python" record by record (lakefeed.blob.job.read_records).
DECODERS = ("auto", "python")


@dataclass(frozen=True)
class BlobPipelineConfig(Carried):
    """Settings of the blob change feed DAG (keys of the ``lakefeed_blob_config`` Variable)."""

    feed_root: str = str(DATA_DIR / "feed")
    events_table: str = str(DATA_DIR / "lake" / "blob_events")
    state_table: str = str(DATA_DIR / "lake" / "blob_state")
    job_summary_root: str | None = None  # where a driver on the cluster leaves its summary (a URL)
    checkpoint_variable: str = "lakefeed_blob_checkpoint"
    wasb_conn_id: str | None = None  # read the feed through this Azure connection
    max_windows_per_run: int = 24
    windows_per_batch: int = 6  # windows per spark-submit
    sensor_poke_seconds: float = 60.0
    sensor_timeout_seconds: float = 3000.0  # then the run is skipped: nothing new this hour
    start_from: str | None = None  # ISO time: ignore windows before it on first run
    spark_conf: dict[str, Any] | None = None  # extra --conf settings for spark-submit
    spark_job_timeout_minutes: float = 180.0  # a spark-submit running longer is killed (then retried)
    decoder: str = "auto"  # the job's --decoder: auto | python
    # The account's change feed retention in days, or "unlimited"; None: not known (lakefeed.blob.shards).
    change_feed_retention_days: int | str | None = None

    @classmethod
    def from_mapping(cls, overrides: dict[str, Any] | None, where: str = "config") -> BlobPipelineConfig:
        config = from_mapping(cls, overrides, where)
        retention = config.change_feed_retention_days
        if (isinstance(retention, int) and retention < 1) or (isinstance(retention, str) and retention != "unlimited"):
            raise ConfigError(
                f"{where}: change_feed_retention_days must be a number of days (at least 1) or "
                f'"unlimited", not {retention!r}'
            )
        if config.max_windows_per_run < 1 or config.windows_per_batch < 1:
            raise ConfigError(f"{where}: max_windows_per_run and windows_per_batch must be at least 1")
        check_spark_settings(config.spark_conf, config.spark_job_timeout_minutes, where)
        if config.decoder not in DECODERS:
            raise ConfigError(f"{where}: decoder must be 'auto' or 'python', not {config.decoder!r}")
        return config

    @classmethod
    def from_json(cls, text: str | None, where: str) -> BlobPipelineConfig:
        return cls.from_mapping(json_document(text, where), where)
