"""What every feed's configuration shares (each feed's own is ``lakefeed.<feed>.config``): documented
defaults that point at the demo, overridden by a JSON mapping, carried in a run's plan (:class:`Carried`).

Airflow supplies the mapping from the feed's Variable (``FeedSpec.config_variable``, or the environment
variable ``AIRFLOW_VAR_<NAME>``); nothing here imports Airflow. Unknown keys and wrong types are errors
that name the key.
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import MISSING, asdict, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any, Self, TypeVar

from lakefeed.errors import ConfigError
from lakefeed.jsonio import json_object

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

log = logging.getLogger(__name__)

PROJECT_ROOT = Path(os.environ.get("LAKEFEED_HOME", Path(__file__).resolve().parents[2]))
DATA_DIR = Path(os.environ.get("LAKEFEED_DATA", PROJECT_ROOT / "data" / "demo"))


class Carried:
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


def check_retention(hours: float | None, where: str) -> None:
    if hours is not None and not hours > 0:
        raise ConfigError(
            f"{where}: tombstone_retention_hours must be a positive number of hours (or null), not {hours!r}"
        )


def check_spark_settings(spark_conf: dict[str, Any] | None, timeout_minutes: float, where: str) -> None:
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


def json_document(text: str | None, where: str) -> dict[str, Any] | None:
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
    required = [
        f.name for f in fields(cls) if f.default is MISSING and f.default_factory is MISSING and f.name not in overrides
    ]
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
