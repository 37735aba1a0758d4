"""How the typed records that cross a task or process boundary become JSON documents and back, in one place.

In code they are dataclasses with snake_case fields (a run's plan, a job's summary); as documents (XComs,
a job's summary file) their keys are camelCase, the names the monitor, the docs and earlier runs' XComs use.
:func:`to_document` and :func:`from_document` are the only translation. Times are ISO strings
(:func:`lakefeed.times.format_time`); a type with ``as_document()`` and ``of_document(value, where)`` (a
pipeline's configuration) brings its own form. A stored record declares ``DOCUMENT_VERSION`` and a field
``version``: a document of a newer version is refused, one without a version is read as version 1. A field
marked :func:`counted` is one of the counts a commit step adds up over its jobs (:func:`counted_keys`); one
marked :func:`optional` is left out of the document while it is None; one made by :func:`totals` (a run's
counts, added up over its jobs' summaries) stands in the document as keys of its own.

>>> from dataclasses import dataclass
>>> @dataclass
... class Example:
...     rows_read: int = counted()
...     target_table: str | None = None
...     note: str | None = optional()
>>> to_document(Example(rows_read=3))
{'rowsRead': 3, 'targetTable': None}
>>> from_document(Example, {"rowsRead": 3, "note": "n"}, "an example")
Example(rows_read=3, target_table=None, note='n')
>>> from_document(Example, {"rowsRead": "3"}, "an example")
Traceback (most recent call last):
...
lakefeed.errors.DocumentError: an example: rowsRead must be int, got '3'
>>> counted_keys(Example)
('rowsRead',)
"""

from __future__ import annotations

import dataclasses
import re
import types
import typing
from datetime import datetime
from typing import Any, TypeVar

from lakefeed.errors import DocumentError
from lakefeed.times import format_time, parse_time

__all__ = [
    "camel",
    "counted",
    "counted_fields",
    "counted_keys",
    "format_document",
    "from_document",
    "optional",
    "snake",
    "to_document",
    "totals",
]

_COUNTED = "lakefeed.counted"
_OPTIONAL = "lakefeed.optional"
_TOTALS = "lakefeed.totals"
T = TypeVar("T")


def camel(name: str) -> str:
    """``events_inserted`` → ``eventsInserted``."""
    head, *rest = name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def snake(key: str) -> str:
    """``eventsInserted`` → ``events_inserted``."""
    return re.sub(r"(?<=[a-z0-9])([A-Z])", lambda m: "_" + m.group(1).lower(), key)


def counted() -> Any:
    """A count of a job's summary (0 until set) that the commit step adds up over the run's jobs."""
    return dataclasses.field(default=0, metadata={_COUNTED: True})


def optional() -> Any:
    """A field that is None unless set, and then left out of the document."""
    return dataclasses.field(default=None, metadata={_OPTIONAL: True})


def totals(summary_type: type) -> dict[str, Any]:
    """The metadata of a ``dict[str, int]`` field holding the :func:`counted` figures of ``summary_type``
    added up, by field name (a run summary's totals of its jobs' summaries): in the document they stand
    beside the record's own keys. ``field(default_factory=dict, metadata=totals(RunSummary))``."""
    return {_TOTALS: summary_type}


def counted_fields(cls: type) -> tuple[str, ...]:
    """The names of ``cls``'s :func:`counted` fields, in declaration order."""
    return tuple(f.name for f in dataclasses.fields(cls) if f.metadata.get(_COUNTED))


def counted_keys(cls: type) -> tuple[str, ...]:
    """The document keys of ``cls``'s :func:`counted` fields, in declaration order."""
    return tuple(map(camel, counted_fields(cls)))


def to_document(record: Any) -> dict[str, Any]:
    """A dataclass as its JSON document: camelCase keys, nested dataclasses as documents too."""
    document: dict[str, Any] = {}
    for f in dataclasses.fields(record):
        value = getattr(record, f.name)
        if f.metadata.get(_TOTALS):
            document.update({camel(name): count for name, count in value.items()})
        elif not (value is None and f.metadata.get(_OPTIONAL)):
            document[camel(f.name)] = _plain(value)
    return document


def _plain(value: Any) -> Any:
    if hasattr(value, "as_document"):
        return value.as_document()
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return to_document(value)
    if isinstance(value, datetime):
        return format_time(value)
    if isinstance(value, dict):
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(item) for item in value]
    return value


def from_document(cls: type[T], document: Any, where: str) -> T:
    """The ``cls`` record a document holds (:func:`to_document`'s inverse); refuses, naming ``where`` and the
    key, a document that is not an object, lacks a key that has no default, holds a value of another type,
    or has a newer ``version`` than ``cls.DOCUMENT_VERSION``. Keys it does not know are ignored (a document
    written by a newer version of a record that only added keys)."""
    if not isinstance(document, dict):
        raise DocumentError(f"{where}: expected a JSON object, got {type(document).__name__}")
    readable = getattr(cls, "DOCUMENT_VERSION", None)
    if readable is not None:
        version = document.get("version", 1)
        if not isinstance(version, int) or isinstance(version, bool) or version > readable:
            raise DocumentError(
                f"{where}: version {version!r} is newer than this code reads (up to {readable}); "
                "was it written by a newer lakefeed?"
            )
    hints = typing.get_type_hints(cls)
    values = {}
    for f in dataclasses.fields(cls):  # type: ignore[arg-type]  # cls is a dataclass
        summary_type = f.metadata.get(_TOTALS)
        if summary_type is not None:
            values[f.name] = {
                name: _typed(int, document[camel(name)], where, camel(name))
                for name in counted_fields(summary_type)
                if camel(name) in document
            }
            continue
        key = camel(f.name)
        if key not in document:
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                raise DocumentError(f"{where}: {key} is missing")
            continue
        values[f.name] = _typed(hints[f.name], document[key], where, key)
    return cls(**values)


_SCALARS: dict[type, tuple[type, ...]] = {str: (str,), int: (int,), float: (int, float), bool: (bool,)}


def _typed(declared: Any, value: Any, where: str, key: str) -> Any:
    """``value`` read as ``declared`` (a scalar, a time, a dataclass, list/tuple/dict of those, X | None, Any)."""
    if declared is Any:
        return value
    origin, arguments = typing.get_origin(declared), typing.get_args(declared)
    if origin in (types.UnionType, typing.Union):
        if value is None and type(None) in arguments:
            return None
        (inner,) = [a for a in arguments if a is not type(None)]  # only X | None is declared
        return _typed(inner, value, where, key)
    if hasattr(declared, "of_document"):
        return declared.of_document(value, f"{where}: {key}")
    if isinstance(declared, type) and dataclasses.is_dataclass(declared):
        return from_document(declared, value, f"{where}: {key}")
    if declared is datetime:
        if not isinstance(value, str):
            raise DocumentError(f"{where}: {key} must be an ISO time, got {value!r}")
        try:
            return parse_time(value)
        except ValueError as exc:
            raise DocumentError(f"{where}: {key} must be an ISO time, got {value!r}") from exc
    if origin in (list, tuple):
        if not isinstance(value, list | tuple):
            raise DocumentError(f"{where}: {key} must be a list, got {value!r}")
        (item,) = arguments[:1] or (Any,)
        items = [_typed(item, v, where, f"{key}[{i}]") for i, v in enumerate(value)]
        return items if origin is list else tuple(items)
    if origin is dict:
        if not isinstance(value, dict):
            raise DocumentError(f"{where}: {key} must be an object, got {value!r}")
        item = arguments[1] if arguments else Any
        return {k: _typed(item, v, where, f"{key}.{k}") for k, v in value.items()}
    expected = _SCALARS.get(declared)
    if expected is not None:
        if (isinstance(value, bool) and declared is not bool) or not isinstance(value, expected):
            raise DocumentError(f"{where}: {key} must be {declared.__name__}, got {value!r}")
        return value
    if origin is None and isinstance(declared, type) and not isinstance(value, declared):
        raise DocumentError(f"{where}: {key} must be {declared.__name__}, got {value!r}")
    return value


def format_document(title: str, document: dict[str, Any], leave_out: tuple[str, ...] = ()) -> str:
    """A document for a log: ``title``, then one aligned line a key (but those left out)."""
    return "\n".join([title] + [f"  {key:<20} {value}" for key, value in document.items() if key not in leave_out])
