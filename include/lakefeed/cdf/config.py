"""The Delta CDF pipelines' configuration (the ``lakefeed_cdf_config`` Variable)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from lakefeed.config import DATA_DIR, Carried, check_retention, check_spark_settings, from_mapping, json_document
from lakefeed.errors import ConfigError


@dataclass(frozen=True)
class CdfPipeline:
    """One source table → one target table."""

    name: str
    source_table: str
    target_table: str
    keys: list[str]
    columns: list[str] | None = None  # only these source columns (keys always kept)
    versions_per_job: int = 50  # source versions per spark-submit
    max_versions_per_run: int = 1000
    wasb_conn_id: str | None = None  # the Azure connection of its tables' account (default: the top-level one)
    scd_type: int = 1  # 1: each key's current row; 2: every version of it (__START_AT/__END_AT, lakefeed.cdf.scd2)
    tombstone_retention_hours: float | None = None  # remove older tombstones (lakefeed.tombstones); None: keep all

    @property
    def checkpoint_variable(self) -> str:
        return f"lakefeed_cdf_checkpoint__{self.name}"


@dataclass(frozen=True)
class CdfConfig(Carried):
    """Settings of the Delta CDF DAG (the ``lakefeed_cdf_config`` Variable)."""

    pipelines: list[CdfPipeline] = None  # type: ignore[assignment]  # default: the demo pipeline
    job_summary_root: str | None = None
    wasb_conn_id: str | None = None  # the Azure connection of the pipelines that name none
    sensor_poke_seconds: float = 60.0
    sensor_timeout_seconds: float = 3000.0
    spark_conf: dict[str, Any] | None = None  # extra --conf settings for spark-submit
    spark_job_timeout_minutes: float = 180.0  # a spark-submit running longer is killed (then retried)

    def __post_init__(self) -> None:
        if self.pipelines is None:
            object.__setattr__(
                self,
                "pipelines",
                [
                    CdfPipeline(
                        name="demo",
                        source_table=str(DATA_DIR / "cdf" / "source"),
                        target_table=str(DATA_DIR / "cdf" / "target"),
                        keys=["id"],
                    )
                ],
            )

    @classmethod
    def from_json(cls, text: str | None, where: str) -> CdfConfig:
        document = json_document(text, where) or {}
        pipelines = document.pop("pipelines", None)
        config = from_mapping(cls, document, where)
        if pipelines is None:
            check_spark_settings(config.spark_conf, config.spark_job_timeout_minutes, where)
            return config
        if not isinstance(pipelines, list) or not pipelines:
            raise ConfigError(f"{where}: pipelines must be a non-empty list")
        parsed = []
        for index, item in enumerate(pipelines):
            if not isinstance(item, dict):
                raise ConfigError(f"{where}: pipelines[{index}] must be an object")
            pipeline = from_mapping(CdfPipeline, item, f"{where} pipelines[{index}]")
            if not pipeline.keys or not all(isinstance(k, str) for k in pipeline.keys):
                raise ConfigError(f"{where}: pipelines[{index}].keys must list key column names")
            if pipeline.versions_per_job < 1 or pipeline.max_versions_per_run < 1:
                raise ConfigError(f"{where}: pipelines[{index}] version counts must be at least 1")
            if pipeline.scd_type not in (1, 2):
                raise ConfigError(f"{where}: pipelines[{index}].scd_type must be 1 or 2, not {pipeline.scd_type!r}")
            check_retention(pipeline.tombstone_retention_hours, f"{where} pipelines[{index}]")
            if pipeline.tombstone_retention_hours is not None and pipeline.scd_type == 2:
                raise ConfigError(
                    f"{where}: pipelines[{index}] is of scd_type 2, which keeps no tombstones: "
                    f"drop its tombstone_retention_hours"
                )
            parsed.append(pipeline if pipeline.wasb_conn_id else replace(pipeline, wasb_conn_id=config.wasb_conn_id))
        names = [p.name for p in parsed]
        if len(set(names)) != len(names):
            raise ConfigError(f"{where}: pipeline names must be unique ({', '.join(names)})")
        check_spark_settings(config.spark_conf, config.spark_job_timeout_minutes, where)
        return replace(config, pipelines=parsed)

    def pipeline(self, name: str) -> CdfPipeline:
        for pipeline in self.pipelines:
            if pipeline.name == name:
                return pipeline
        raise ConfigError(f"no CDF pipeline named {name!r} (configured: {', '.join(p.name for p in self.pipelines)})")
