"""How the typed records that cross a task or process boundary become JSON documents, in one place.

In code they are dataclasses with snake_case fields; as documents (a job's summary file and its XCom) their
keys are camelCase, the names the monitor, the docs and earlier runs' XComs use.
:func:`to_document` is the only translation; a field marked :func:`counted` is one
of the counts a commit step adds up over its jobs (:func:`counted_keys`).

>>> from dataclasses import dataclass
>>> @dataclass
... class Example:
...     rows_read: int = counted()
...     target_table: str | None = None
>>> to_document(Example(rows_read=3))
{'rowsRead': 3, 'targetTable': None}
>>> counted_keys(Example)
('rowsRead',)
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any

__all__ = ["camel", "counted", "counted_keys", "format_document", "snake", "to_document"]

_COUNTED = "lakefeed.counted"


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


def counted_keys(cls: type) -> tuple[str, ...]:
    """The document keys of ``cls``'s :func:`counted` fields, in declaration order."""
    return tuple(camel(f.name) for f in dataclasses.fields(cls) if f.metadata.get(_COUNTED))


def to_document(record: Any) -> dict[str, Any]:
    """A dataclass as its JSON document: camelCase keys, nested dataclasses as documents too."""
    return {camel(f.name): _plain(getattr(record, f.name)) for f in dataclasses.fields(record)}


def _plain(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return to_document(value)
    if isinstance(value, dict):
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(item) for item in value]
    return value


def format_document(title: str, document: dict[str, Any], leave_out: tuple[str, ...] = ()) -> str:
    """A document for a log: ``title``, then one aligned line a key (but those left out)."""
    return "\n".join([title] + [f"  {key:<20} {value}" for key, value in document.items() if key not in leave_out])
