"""The DAGs' trigger forms: the params, their titles and the hints people read.

The schemas say only a value's type: every rule about the values (a real
calendar date, the feed's hourly grid, a range in order, a version of 0 or more,
a configured pipeline) lives in :mod:`lakefeed.run_params`, which refuses in
sentences. The api-server applies it when a run is triggered
(:mod:`lakefeed_airflow.trigger_check`), so a bad form is refused before a run
exists; the plan applies it again first thing (runs triggered another way). A
``pattern`` or ``minimum`` here would be answered with the schema's own wording
(a regular expression), and the UI's number field silently clamps to
``minimum`` (-1 became 0 and ran a replay).

Two hints come from the pipelines' Variables when the DAG file is parsed: the
blob feed's grid minute (recorded in its checkpoint) and the configured CDF
pipelines. This is the only Variable access at parse time; it is best effort
(any failure, or no Variable yet, gives a generic form) and reads nothing else.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, TypeVar

from airflow.sdk import Param

T = TypeVar("T")


def _at_parse_time(read: Callable[[], T], fallback: T) -> T:
    try:
        return read()
    except Exception:  # no Variable, no metadata access while parsing (e.g. `airflow dags test`), bad JSON
        return fallback


def _variable_json(name: str) -> dict:
    from airflow.sdk import Variable

    text = Variable.get(name, default=None)
    return json.loads(text) if text else {}


def blob_grid_minute() -> int | None:
    """The minute past the hour the blob feed's windows start at, as its checkpoint recorded it."""
    from lakefeed_airflow.settings import BLOB_CONFIG_VARIABLE

    def read() -> int | None:
        variable = _variable_json(BLOB_CONFIG_VARIABLE).get("checkpoint_variable", "lakefeed_blob_checkpoint")
        minute = _variable_json(variable).get("gridMinute")
        return minute if isinstance(minute, int) and 0 <= minute < 60 else None

    return _at_parse_time(read, None)


def cdf_pipeline_names() -> list[str] | None:
    """The configured CDF pipelines (the demo's when there is no config Variable)."""
    from lakefeed.config import CdfConfig
    from lakefeed_airflow.settings import CDF_CONFIG_VARIABLE

    def read() -> list[str]:
        from airflow.sdk import Variable

        text = Variable.get(CDF_CONFIG_VARIABLE, default=None)
        return [p.name for p in CdfConfig.from_json(text, CDF_CONFIG_VARIABLE).pipelines]

    return _at_parse_time(read, None)


# Airflow's Backfill mode shows the same form but passes no params to its runs.
SINGLE_RUN_ONLY = (
    "Single Run only: Airflow's Backfill mode ignores this field, and each of its runs re-processes its own hour."
)


def adopt_targets_param(what: str) -> Param:
    return flag_param(
        "Adopt existing targets",
        f"Merge into {what} although they hold rows this pipeline did not write (another "
        f"tool's, or this pipeline's under another checkpoint Variable): with an empty "
        f"checkpoint, any such rows; afterwards, rows changed since the checkpoint recorded "
        f"the table. Without it such a run is refused.",
    )


def flag_param(title: str, description: str) -> Param:
    """A yes/no param, off unless the person triggering the run turns it on."""
    return Param(False, type="boolean", title=title, description=description)


def range_param(title: str, description: str, kind: str = "string") -> Param:
    """One end of a range a run re-processes; empty for a normal run."""
    return Param(None, type=["null", kind], title=title, description=description)


def blob_params(grid_minute: int | None) -> dict[str, Param]:
    on_grid = (
        f"windows start at minute {grid_minute:02d} of every hour (hh:{grid_minute:02d})"
        if grid_minute is not None
        else "windows start at the minute the feed's segments start at (hh:10 for Azure's feeds; the "
        "DAG's run summaries show it as gridMinute)"
    )
    example = f"2026-01-01T00:{grid_minute if grid_minute is not None else 10:02d}:00Z"
    hint = f"ISO-8601 UTC on the feed's hourly grid: {on_grid}. Example: {example}."
    return {
        "window_start": range_param(
            "Backfill from (window start)",
            f"Re-process the windows from this one on. Leave empty for a normal "
            f"run. Give window_end too. {hint} {SINGLE_RUN_ONLY}",
        ),
        "window_end": range_param(
            "Backfill until (exclusive)", f"The first window not to re-process; after window_start. {hint}"
        ),
        "reset_checkpoint": flag_param(
            "Reset the checkpoint",
            "Forget the checkpoint and ingest from the feed's first window (or "
            "start_from) into the configured targets, recording the feed and "
            "targets anew: the way on after the feed or a target was replaced.",
        ),
        "acknowledge_data_loss": flag_param(
            "Acknowledge data loss",
            "Go on past change feed segments or chunk files that retention "
            "deleted before they were read. A run without it stops naming "
            "the windows that may be missing events; with it, the run "
            "applies what remains and its summary records the windows given "
            "up (dataLossAcknowledged, missingShards).",
        ),
        "adopt_targets": adopt_targets_param("the configured events and state tables"),
    }


def cdf_params(pipelines: list[str] | None) -> dict[str, Param]:
    choice: dict[str, Any] = {"enum": [None, *pipelines]} if pipelines else {}
    return {
        "pipeline": Param(
            None,
            type=["null", "string"],
            title="Pipeline",
            **choice,
            description="The configured pipeline to backfill or refresh; empty for a normal run "
            "(needed for a range or a full refresh when several are configured).",
        ),
        "starting_version": range_param(
            "Starting version (inclusive)",
            f"Re-apply source versions from this one; give ending_version too. {SINGLE_RUN_ONLY}",
            "integer",
        ),
        "ending_version": range_param(
            "Ending version (inclusive)",
            "Last source version to re-apply; with full_refresh, the snapshot version (default: the latest).",
            "integer",
        ),
        "full_refresh": flag_param(
            "Full refresh",
            "Rebuild the target from a snapshot of the source (at ending_version, "
            "default the latest) and set the checkpoint to exactly that version, "
            "even when it was ahead: the next run applies the versions after it.",
        ),
        "adopt_targets": adopt_targets_param("the configured target tables"),
    }


def crdb_params() -> dict[str, Param]:
    hint = (
        "A RESOLVED timestamp as the sink writes it: <wall ns>.<10-digit logical>, e.g. "
        "1714751617108996000.0000000000 (the run summaries show resolved and newestResolved)."
    )
    return {
        "after_resolved": range_param(
            "Backfill after (RESOLVED)",
            f"Re-apply the files after this RESOLVED file (empty: from the sink's "
            f"first file). Give through_resolved too. {hint}",
        ),
        "through_resolved": range_param(
            "Backfill through (RESOLVED)",
            f"Re-apply the files up to this RESOLVED file. Leave empty for a normal run. {hint} {SINGLE_RUN_ONLY}",
        ),
        "reset_checkpoint": flag_param(
            "Reset the checkpoint",
            "Forget the checkpoint and apply the sink from its first file, "
            "recording the sink and tables anew: the way on after the sink moved or "
            "a topic table was replaced.",
        ),
        "adopt_targets": adopt_targets_param("the topic tables under the configured target_root"),
    }
