"""The blob change feed pipeline as the monitor shows it (:class:`lakefeed.monitor.Watched`): the watermark
against ``lastConsumable``, in hours."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict
from typing import Any

from lakefeed import pipeline as skeleton
from lakefeed.blob.checkpoint import BlobCheckpoint
from lakefeed.blob.config import BlobPipelineConfig
from lakefeed.blob.feed import ChangeFeed
from lakefeed.blob.timegrid import HOUR
from lakefeed.checkpoint_store import CheckpointStore
from lakefeed.monitor import RunRow, Watched, figures_row, span
from lakefeed.times import format_time, parse_time

# The row's figures: the run summary's counts each adds up.
FIGURES = {
    "read": ("recordsRead",),
    "claimed": ("eventsClaimed",),  # events of the run's windows
    "strays": ("strays",),  # events of other hours met while reading neighbours
    "duplicates": ("duplicatesRemoved",),
    "inserted": ("eventsInserted", "stateInserted"),
    "updated": ("stateUpdated",),
    "lag": ("lagHours",),
}


def watched(
    config: BlobPipelineConfig,
    checkpoints: Callable[[BlobPipelineConfig], CheckpointStore],
    storage: skeleton.Storage,
) -> list[Watched]:
    def recorded(checkpoint: BlobCheckpoint) -> str | None:
        return format_time(checkpoint.watermark) if checkpoint.watermark else None

    def last_consumable(_: Any) -> str:
        return format_time(ChangeFeed(storage.feed(config.feed_root, config.wasb_conn_id)).last_consumable())

    return [
        Watched(
            key="blob",
            title="Azure Blob change feed → Delta",
            config=asdict(config),
            load_checkpoint=checkpoints(config).load,
            checkpoint_label="watermark",
            recorded=recorded,
            position_label="lastConsumable",
            read_position=last_consumable,
            lag_unit="hours",
            lag=lambda later, earlier: round((parse_time(later) - parse_time(earlier)) / HOUR, 2),
            row=run_row,
        )
    ]


def run_row(base: dict[str, Any], report: dict[str, Any] | None) -> RunRow:
    """A blob change feed run: windows applied, records read, events claimed, strays, duplicates,
    events inserted and state rows inserted/updated."""
    if not report:
        return RunRow(**base)
    windows = report.get("windowsApplied")  # reports written before it: the windows of the changes announced
    if windows is None:
        windows = sorted({w for change in report.get("targetsChanged", []) for w in change["extra"].get("windows", [])})
    batches = report.get("batches")
    applied = span(windows) or (
        f"{report.get('windowsPlanned', 0)} window(s) in {batches} batch(es)" if batches is not None else None
    )
    return figures_row(base, report, applied, FIGURES, deleted=0 if "eventsInserted" in report else None)
