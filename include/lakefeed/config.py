"""Pipeline configuration: documented defaults that point at the demo, overridden by a JSON mapping.

Airflow supplies the mapping from the Variable ``lakefeed_blob_config`` (or
the environment variable ``AIRFLOW_VAR_LAKEFEED_BLOB_CONFIG``); nothing here
imports Airflow. Unknown keys and wrong types are errors that name the key.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

PROJECT_ROOT = Path(os.environ.get("LAKEFEED_HOME", Path(__file__).resolve().parents[2]))
DATA_DIR = Path(os.environ.get("LAKEFEED_DATA", PROJECT_ROOT / "data" / "demo"))


class ConfigError(ValueError):
    pass


@dataclass(frozen=True)
class BlobPipelineConfig:
    """Settings of the blob change feed DAG (keys of the ``lakefeed_blob_config`` Variable)."""

    feed_root: str = str(DATA_DIR / "feed")
    events_table: str = str(DATA_DIR / "lake" / "blob_events")
    state_table: str = str(DATA_DIR / "lake" / "blob_state")
    run_dir: str = str(DATA_DIR / "runs")          # per-run job summaries
    checkpoint_variable: str = "lakefeed_blob_checkpoint"
    wasb_conn_id: str | None = None                # read the feed through this Azure connection
    max_windows_per_run: int = 24
    windows_per_batch: int = 6                     # windows per spark-submit
    sensor_poke_seconds: float = 60.0
    sensor_timeout_seconds: float = 3000.0         # then the run is skipped: nothing new this hour
    start_from: str | None = None                  # ISO time: ignore windows before it on first run
    spark_conf: dict | None = None                 # extra --conf for spark-submit

    @classmethod
    def from_mapping(cls, overrides: dict[str, Any] | None, where: str = "config") -> "BlobPipelineConfig":
        overrides = dict(overrides or {})
        known = {f.name: f for f in fields(cls)}
        unknown = sorted(set(overrides) - set(known))
        if unknown:
            raise ConfigError(f"{where}: unknown key(s) {', '.join(unknown)}; known: {', '.join(known)}")
        for key, value in overrides.items():
            _check_type(key, value, cls.__dataclass_fields__[key].type, where)
        config = cls(**overrides)
        if config.max_windows_per_run < 1 or config.windows_per_batch < 1:
            raise ConfigError(f"{where}: max_windows_per_run and windows_per_batch must be at least 1")
        return config

    @classmethod
    def from_json(cls, text: str | None, where: str) -> "BlobPipelineConfig":
        if not text:
            return cls()
        try:
            document = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ConfigError(f"{where} is not JSON ({exc})") from None
        if not isinstance(document, dict):
            raise ConfigError(f"{where} must be a JSON object")
        return cls.from_mapping(document, where)


_TYPES = {"str": str, "int": int, "float": (int, float), "dict": dict}


def _check_type(key: str, value: Any, declared: str, where: str) -> None:
    optional = "None" in declared
    if value is None:
        if not optional:
            raise ConfigError(f"{where}: {key} must not be null")
        return
    base = declared.split("|")[0].strip()
    expected = _TYPES[base]
    if isinstance(value, bool) or not isinstance(value, expected):
        raise ConfigError(f"{where}: {key} must be {base}, got {value!r}")
