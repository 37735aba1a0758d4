"""The pieces of the DAGs' trigger forms, as JSON-schema fields (the Airflow layer makes each an Airflow
``Param``): each feed's form (``FeedSpec.form``) is built from them.

The schemas say only a value's type: every rule about the values (a real calendar date, the feed's hourly
grid, a range in order, a version of 0 or more, a configured pipeline) lives in the feed's request
parsing (:meth:`lakefeed.pipeline.FeedHooks.request`), which refuses in sentences. The api-server applies
it when a run is triggered (``lakefeed_airflow.trigger_check``), so a bad form is refused before a run
exists; the plan applies it again first thing (runs triggered another way). A ``pattern`` or ``minimum``
here would be answered with the schema's own wording (a regular expression), and the UI's number field
silently clamps to ``minimum`` (-1 became 0 and ran a replay). Forms read nothing: a DAG file parses the
same whatever the Variables hold.
"""

from __future__ import annotations

from typing import Any

Field = dict[str, Any]  # a param's default and JSON-schema fields (type, title, description, enum)

# Airflow's Backfill mode shows the same form but passes no params to its runs.
SINGLE_RUN_ONLY = (
    "Single Run only: Airflow's Backfill mode ignores this field, and each of its runs re-processes its own hour."
)


def flag(title: str, description: str) -> Field:
    """A yes/no param, off unless the person triggering the run turns it on."""
    return {"default": False, "type": "boolean", "title": title, "description": description}


def range_end(title: str, description: str, kind: str = "string") -> Field:
    """One end of a range a run re-processes; empty for a normal run."""
    return {"default": None, "type": ["null", kind], "title": title, "description": description}


def adopt_targets(what: str) -> Field:
    return flag(
        "Adopt existing targets",
        f"Merge into {what} although they hold rows this pipeline did not write (another "
        f"tool's, or this pipeline's under another checkpoint Variable): with an empty "
        f"checkpoint, any such rows; afterwards, rows changed since the checkpoint recorded "
        f"the table. Without it such a run is refused.",
    )
