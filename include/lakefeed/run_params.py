"""The params a person gives a run (the DAGs' trigger forms), checked as one request, refused in sentences.

Each feed turns the params into the request its plan serves (``lakefeed.<feed>.params``, called by its
``FeedHooks.request``) and raises a :class:`~lakefeed.errors.ConfigError` that says what is wrong in words
(a date that is not in the calendar, a time off the feed's hourly grid, a range
given backwards, a negative version), never a regular expression. The plan calls
them first thing; the api-server calls the same functions when a run is
triggered (``lakefeed_airflow.trigger_check``), so a bad form is refused
before a run exists, with the same sentence.

Pure: no Airflow, no I/O. What the api-server knows besides the params (the
feed's grid minute from the checkpoint, the configured CDF pipelines) comes in
as arguments, ``None`` when unknown. This module holds what they share.
"""

from __future__ import annotations

from typing import Any


def given(params: dict[str, Any], name: str) -> Any:
    value = params.get(name)
    return None if value is None or (isinstance(value, str) and not value.strip()) else value
