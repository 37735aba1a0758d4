"""Which Avro writer schemas the columnar reader represents exactly: the superset's fields with the types
the service writes (strings or enums for text, int or long for numbers, the maps and records of ``data``),
nothing it would drop or reinterpret. Any other file is decoded record by record (:mod:`lakefeed.blob.records`),
which keeps unknown fields in ``extra``."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from lakefeed.blob.schema import (
    DATA_BOOL_FIELDS,
    DATA_LONG_FIELDS,
    DATA_MAP_FIELDS,
    DATA_STRING_FIELDS,
    EVENT_FIELDS,
    EVENT_STRING_FIELDS,
)

if TYPE_CHECKING:
    pass

if TYPE_CHECKING:
    pass


_TEXT_KINDS = ("string", "enum")  # the service writes eventType, api, blobType and blobTier as Avro enums


TAG_SIDES = ("previous", "current")


def columnar_readable(writer_schema: Any) -> bool:
    """Whether the superset represents every field of this writer schema exactly, nested ones included,
    so the columnar reader can lose nothing: the superset's fields only; text as ``string`` or ``enum``;
    counts as ``int`` or ``long``; maps of strings; ``blobPropertiesUpdated`` a map of records of
    ``current``/``previous`` strings; ``blobTagsUpdated`` a record or a map (the service's) of
    ``previous``/``current`` string maps; no logical types. Anything else takes the record path."""
    if not isinstance(writer_schema, dict) or writer_schema.get("type") != "record" or _has_logical_type(writer_schema):
        return False
    top = {f["name"]: f["type"] for f in writer_schema.get("fields", [])}
    if set(top) - frozenset(EVENT_FIELDS) or "data" not in top:
        return False
    if not all(_kind(top[name]) in _TEXT_KINDS for name in EVENT_STRING_FIELDS if name in top):
        return False
    if "schemaVersion" in top and _kind(top["schemaVersion"]) not in ("int", "long"):
        return False
    data = non_null(top["data"])
    if not isinstance(data, dict) or data.get("type") != "record":
        return False
    for field in data.get("fields", []):
        name, kind = field["name"], non_null(field["type"])
        if name in DATA_STRING_FIELDS:
            ok = _kind(kind) in _TEXT_KINDS
        elif name in DATA_LONG_FIELDS:
            ok = _kind(kind) in ("int", "long")
        elif name in DATA_BOOL_FIELDS:
            ok = _kind(kind) == "boolean"
        elif name in DATA_MAP_FIELDS:
            ok = _is_string_map(kind)
        elif name == "blobPropertiesUpdated":
            ok = _kind(kind) == "map" and _is_record_of(kind.get("values"), ["current", "previous"], _is_string)
        elif name == "blobTagsUpdated":
            ok = _is_record_of(kind, list(TAG_SIDES), _is_string_map) or (
                _kind(kind) == "map" and _is_string_map(kind.get("values"))
            )
        else:
            ok = False
        if not ok:
            return False
    return True


def _is_string(avro_type: Any) -> bool:
    return _kind(avro_type) == "string"


def _is_string_map(avro_type: Any) -> bool:
    avro_type = non_null(avro_type)
    return isinstance(avro_type, dict) and avro_type.get("type") == "map" and _is_string(avro_type.get("values"))


def _is_record_of(avro_type: Any, names: list[str], is_field_type: Callable[[Any], bool]) -> bool:
    """A record of exactly these fields, in this order (the superset's own), each of the given kind."""
    avro_type = non_null(avro_type)
    if not isinstance(avro_type, dict) or avro_type.get("type") != "record":
        return False
    fields = avro_type.get("fields", [])
    return [f["name"] for f in fields] == names and all(is_field_type(f["type"]) for f in fields)


def _has_logical_type(avro_type: Any) -> bool:
    if isinstance(avro_type, dict):
        return "logicalType" in avro_type or any(_has_logical_type(v) for v in avro_type.values())
    if isinstance(avro_type, list):
        return any(_has_logical_type(v) for v in avro_type)
    return False


def non_null(avro_type: Any) -> Any:
    """``X`` of ``X`` or ``["null", X]``; None for a union of several types."""
    if isinstance(avro_type, list):
        rest = [t for t in avro_type if t != "null"]
        return rest[0] if len(rest) == 1 else None
    return avro_type


def _kind(avro_type: Any) -> object:
    """The type's name (a string, or None for a union of several types, in a valid schema)."""
    avro_type = non_null(avro_type)
    if isinstance(avro_type, dict):
        return avro_type.get("type")
    return avro_type
