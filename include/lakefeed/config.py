"""Pipeline configuration: documented defaults that point at the demo, overridden by a JSON mapping.

Airflow supplies the mapping from the Variable ``lakefeed_blob_config`` (or
the environment variable ``AIRFLOW_VAR_LAKEFEED_BLOB_CONFIG``); nothing here
imports Airflow. Unknown keys and wrong types are errors that name the key.
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import MISSING, asdict, dataclass, fields, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Self, TypeVar

from lakefeed.errors import ConfigError
from lakefeed.jsonio import json_object

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

log = logging.getLogger(__name__)

PROJECT_ROOT = Path(os.environ.get("LAKEFEED_HOME", Path(__file__).resolve().parents[2]))
DATA_DIR = Path(os.environ.get("LAKEFEED_DATA", PROJECT_ROOT / "data" / "demo"))


# How the blob job decodes chunk files (its --decoder): "auto" reads each file column by column where the
# columnar reader represents it exactly, "python" record by record (lakefeed.blob.job.read_records).
DECODERS = ("auto", "python")


class _Carried:
    """A configuration as a run's plan carries it (:mod:`lakefeed.documents`): the JSON mapping it was read
    from, defaults filled in, read back with the same checks as the Variable."""

    def as_document(self) -> dict[str, Any]:
        mapping: dict[str, Any] = asdict(self)  # type: ignore[call-overload]
        return mapping

    @classmethod
    def of_document(cls, value: Any, where: str) -> Self:
        return cls.from_json(json.dumps(value), where)

    @classmethod
    def from_json(cls, text: str | None, where: str) -> Self:
        raise NotImplementedError


@dataclass(frozen=True)
class BlobPipelineConfig(_Carried):
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
        _check_spark_settings(config.spark_conf, config.spark_job_timeout_minutes, where)
        if config.decoder not in DECODERS:
            raise ConfigError(f"{where}: decoder must be 'auto' or 'python', not {config.decoder!r}")
        return config

    @classmethod
    def from_json(cls, text: str | None, where: str) -> BlobPipelineConfig:
        return cls.from_mapping(_json_object(text, where), where)


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
class CdfConfig(_Carried):
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
        document = _json_object(text, where) or {}
        pipelines = document.pop("pipelines", None)
        config = from_mapping(cls, document, where)
        if pipelines is None:
            _check_spark_settings(config.spark_conf, config.spark_job_timeout_minutes, where)
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
            _check_retention(pipeline.tombstone_retention_hours, f"{where} pipelines[{index}]")
            if pipeline.tombstone_retention_hours is not None and pipeline.scd_type == 2:
                raise ConfigError(
                    f"{where}: pipelines[{index}] is of scd_type 2, which keeps no tombstones: "
                    f"drop its tombstone_retention_hours"
                )
            parsed.append(pipeline if pipeline.wasb_conn_id else replace(pipeline, wasb_conn_id=config.wasb_conn_id))
        names = [p.name for p in parsed]
        if len(set(names)) != len(names):
            raise ConfigError(f"{where}: pipeline names must be unique ({', '.join(names)})")
        _check_spark_settings(config.spark_conf, config.spark_job_timeout_minutes, where)
        return replace(config, pipelines=parsed)

    def pipeline(self, name: str) -> CdfPipeline:
        for pipeline in self.pipelines:
            if pipeline.name == name:
                return pipeline
        raise ConfigError(f"no CDF pipeline named {name!r} (configured: {', '.join(p.name for p in self.pipelines)})")


@dataclass(frozen=True)
class CrdbConfig(_Carried):
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

    @classmethod
    def from_json(cls, text: str | None, where: str) -> CrdbConfig:
        config = from_mapping(cls, _json_object(text, where), where)
        if config.resolved_per_batch < 1 or config.max_batches_per_run < 1:
            raise ConfigError(f"{where}: resolved_per_batch and max_batches_per_run must be at least 1")
        if config.parquet_keys is not None and not all(
            isinstance(v, list) and v and all(isinstance(c, str) for c in v) for v in config.parquet_keys.values()
        ):
            raise ConfigError(f"{where}: parquet_keys must map each topic to its primary key columns")
        _check_retention(config.tombstone_retention_hours, where)
        _check_spark_settings(config.spark_conf, config.spark_job_timeout_minutes, where)
        return config


def _check_retention(hours: float | None, where: str) -> None:
    if hours is not None and not hours > 0:
        raise ConfigError(
            f"{where}: tombstone_retention_hours must be a positive number of hours (or null), not {hours!r}"
        )


def _check_spark_settings(spark_conf: dict[str, Any] | None, timeout_minutes: float, where: str) -> None:
    """Also refuses credentials in ``spark_conf`` (named by key only, the value never printed): a Variable
    is stored in Airflow's metadata and ``--conf`` arguments show in the process list."""
    import re

    from lakefeed.azure import REDACTION_REGEX

    if spark_conf is not None and not all(
        isinstance(k, str) and isinstance(v, (str, int, float, bool)) for k, v in spark_conf.items()
    ):
        raise ConfigError(
            f"{where}: spark_conf must map Spark setting names to plain values "
            f"(keys: {', '.join(map(str, spark_conf))})"
        )
    secret = re.compile(REDACTION_REGEX)
    for key, value in (spark_conf or {}).items():
        if secret.search(key) or secret.search(str(value)):
            raise ConfigError(
                f"{where}: spark_conf[{key!r}] looks like a credential; credentials never go in spark_conf (a "
                f"Variable is stored, and --conf arguments show in the process list). Put it in the cluster's "
                f"spark-defaults.conf or secret store, or in the Airflow connection named by wasb_conn_id."
            )
    if timeout_minutes <= 0:
        raise ConfigError(f"{where}: spark_job_timeout_minutes must be positive, got {timeout_minutes!r}")


def _json_object(text: str | None, where: str) -> dict[str, Any] | None:
    return json_object(text, where, ConfigError)


# Keys earlier versions read and this one ignores (with a warning), so their configurations still load.
RETIRED_KEYS = {
    "run_dir": "nothing is shared through a local folder any more (job summaries travel in XCom, "
    "checkpoint writers take turns through Airflow)"
}


_Config = TypeVar("_Config", bound="DataclassInstance")


def from_mapping(cls: type[_Config], overrides: dict[str, Any] | None, where: str) -> _Config:
    """``cls(**overrides)`` after checking every key is known and every value has the declared type."""
    overrides = dict(overrides or {})
    for key in sorted(set(overrides) & set(RETIRED_KEYS)):
        log.warning("%s: %s is no longer used and is ignored: %s", where, key, RETIRED_KEYS[key])
        del overrides[key]
    known = {f.name for f in fields(cls)}
    unknown = sorted(set(overrides) - known)
    if unknown:
        raise ConfigError(f"{where}: unknown key(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}")
    required = [f.name for f in fields(cls) if f.default is MISSING and f.name not in overrides]
    if required:
        raise ConfigError(f"{where}: missing key(s) {', '.join(required)}")
    for key, value in overrides.items():
        declared = cls.__dataclass_fields__[key].type
        assert isinstance(declared, str)  # annotations are postponed (PEP 563): the type as written
        _check_type(key, value, declared, where)
    return cls(**overrides)


_TYPES: dict[str, type | tuple[type, ...]] = {"str": str, "int": int, "float": (int, float), "dict": dict, "list": list}


def _check_type(key: str, value: Any, declared: str, where: str) -> None:
    optional = "None" in declared
    if value is None:
        if not optional:
            raise ConfigError(f"{where}: {key} must not be null")
        return
    # "dict[str, Any] | None" -> ["dict"]; "int | str | None" -> ["int", "str"]
    bases = [part.split("[")[0].strip() for part in declared.split("|") if part.strip() != "None"]
    expected = tuple(kind for base in bases for kind in _as_tuple(_TYPES[base]))
    if isinstance(value, bool) or not isinstance(value, expected):
        raise ConfigError(f"{where}: {key} must be {' or '.join(bases)}, got {value!r}")


def _as_tuple(kind: type | tuple[type, ...]) -> tuple[type, ...]:
    return kind if isinstance(kind, tuple) else (kind,)
